"""Assigning roles: the user's role group is replaced, and the change is recorded."""
from __future__ import annotations

from django.contrib.auth.models import Group, Permission
from django.db import transaction

from playground.access import PERMISSION_APP, ROLES, forget_role, role_of, role_permission
from playground.accounts.models import RoleChange


class RoleError(ValueError):
    """A role change that is not allowed (the message says why)."""


def role_source(user) -> str:
    """Where the user's role comes from, for the Users page."""
    if user.is_superuser:
        return "superuser"
    if user.groups.filter(name__in=ROLES).exists() or user.user_permissions.filter(
        content_type__app_label=PERMISSION_APP, codename__in=[role_permission(r) for r in ROLES]
    ).exists():
        return "assigned"
    return "default (staff flag)" if user.is_staff else "default"


def assign_role(user, role: str, *, by) -> RoleChange | None:
    """Give `user` exactly `role` ("" = no role: the staff flag decides again). None when nothing changed."""
    if role and role not in ROLES:
        raise RoleError(f"Unknown role {role!r}.")
    if user.pk == getattr(by, "pk", None):
        raise RoleError("You cannot change your own role (ask another admin): it keeps the last admin from locking everyone out.")
    if user.is_superuser:
        raise RoleError(f"{user.get_username()} is a superuser and has every role; superusers are managed in /admin/.")
    before = role_of(user) or ""
    was_assigned = role_source(user) == "assigned"
    with transaction.atomic():
        user.groups.remove(*Group.objects.filter(name__in=ROLES))
        # A role permission given directly (in /admin/) would outrank the select: the select decides.
        user.user_permissions.remove(*Permission.objects.filter(
            content_type__app_label=PERMISSION_APP, codename__in=[role_permission(r) for r in ROLES]))
        if role:
            group, _ = Group.objects.get_or_create(name=role)
            if not group.permissions.filter(codename=role_permission(role)).exists():
                group.permissions.add(Permission.objects.get(content_type__app_label=PERMISSION_APP, codename=role_permission(role)))
            user.groups.add(group)
        forget_role(user)
        after = role_of(user) or ""
        if after == before and bool(role) == was_assigned:
            return None
        return RoleChange.objects.create(user=user, changed_by=by, before=before, after=role)


def create_user(username: str, password: str, *, role: str, by):
    """A new account with `role` (the Users page offers viewer, the least, first); the role given is
    recorded like any change. Validation (name taken, weak password) is the form's."""
    from django.contrib.auth import get_user_model

    if role not in ROLES:
        raise RoleError(f"Unknown role {role!r}.")
    with transaction.atomic():
        user = get_user_model().objects.create_user(username=username, password=password)
        group, _ = Group.objects.get_or_create(name=role)
        user.groups.add(group)
        RoleChange.objects.create(user=user, changed_by=by, before="", after=role)
    return user


def give_new_account_the_least_role(user) -> None:
    """An account created elsewhere (Django's admin) starts as viewer, not as the operator a user with
    no role falls back to; a superuser has every role already."""
    if user.is_superuser or role_source(user) == "assigned":
        return
    user.groups.add(Group.objects.get_or_create(name=ROLES[0])[0])
    forget_role(user)
