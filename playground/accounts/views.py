"""The Users page (admins): every user with their role, a select to change it, and the record of changes."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from playground.access import ADMIN, ROLE_LABELS, ROLES, role_of, role_required
from playground.accounts import services
from playground.accounts.forms import NewUserForm
from playground.accounts.models import RoleChange

RECENT_CHANGES = 50


def _users_page(request, form: NewUserForm, status: int = 200):
    people = list(get_user_model().objects.order_by("username").prefetch_related("groups"))
    rows = [{"user": u, "role": role_of(u), "source": services.role_source(u)} for u in people]
    return render(request, "accounts/users.html", {
        "rows": rows,
        "roles": [(role, ROLE_LABELS[role]) for role in ROLES],
        "changes": RoleChange.objects.select_related("user", "changed_by")[:RECENT_CHANGES],
        "form": form,
    }, status=status)


@role_required(ADMIN, message="Only admins can see users and assign roles.")
@require_safe
def users(request):
    return _users_page(request, NewUserForm())


@role_required(ADMIN, message="Only admins can create users.")
@require_POST
def create_user(request):
    form = NewUserForm(request.POST)
    if not form.is_valid():
        return _users_page(request, form, status=400)
    person = services.create_user(form.cleaned_data["username"], form.cleaned_data["password1"],
                                  role=form.cleaned_data["role"], by=request.user)
    messages.success(request, f"{person.get_username()} can log in now, as {form.cleaned_data['role']}.")
    return redirect("accounts:users")


@role_required(ADMIN, message="Only admins can assign roles.")
@require_POST
def set_role(request, pk: int):
    person = get_object_or_404(get_user_model(), pk=pk)
    role = request.POST.get("role", "")
    try:
        change = services.assign_role(person, role, by=request.user)
    except services.RoleError as exc:
        messages.error(request, str(exc))
        return redirect("accounts:users")
    if change is None:
        messages.info(request, f"{person.get_username()} keeps the {role_of(person)} role.")
    else:
        messages.success(request, f"{person.get_username()} is now {role or 'on the default role'} ({role_of(person)}).")
    return redirect("accounts:users")
