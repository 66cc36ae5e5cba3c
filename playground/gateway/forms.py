from __future__ import annotations

from django import forms

from playground.registry.models import AgentProfile


class TokenForm(forms.Form):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.order_by("name"))
    name = forms.CharField(max_length=100, help_text="Who or what will use it, e.g. “Claude Code on the build box”.")
