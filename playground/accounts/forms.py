"""The Users page's form for a new account."""
from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm

from playground.access import ROLES


class NewUserForm(UserCreationForm):
    """Django's own checks (name taken, password rules, the two passwords alike), plus the role the
    account starts with: viewer, the least, unless the admin picks another."""

    role = forms.ChoiceField(choices=[(role, role) for role in ROLES], initial=ROLES[0])

    class Meta(UserCreationForm.Meta):
        fields = ("username",)
