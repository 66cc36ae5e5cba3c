"""playground.access: the one place that says who is staff, for views, sockets and templates."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.test import RequestFactory

from playground.access import is_staff, require_staff, staff_for_writes, staff_required


@pytest.fixture
def rf():
    return RequestFactory()


def _view(request):
    return HttpResponse("ok")


def test_is_staff_for_users_anonymous_and_none(admin_user, viewer_user):
    assert is_staff(admin_user)
    assert not is_staff(viewer_user)
    assert not is_staff(AnonymousUser())
    assert not is_staff(None)


@pytest.mark.django_db
def test_require_staff_raises_for_a_viewer(viewer_user, admin_user):
    require_staff(admin_user)
    with pytest.raises(PermissionDenied, match="no entry"):
        require_staff(viewer_user, "no entry")


@pytest.mark.django_db
@pytest.mark.parametrize("decorator", [staff_required, staff_required(message="staff only here")])
def test_staff_required_for_every_method(rf, decorator, admin_user, viewer_user):
    view = decorator(_view)
    anonymous = rf.get("/")
    anonymous.user = AnonymousUser()
    assert view(anonymous).status_code == 302  # to the login page
    for method in ("get", "post"):
        request = getattr(rf, method)("/")
        request.user = viewer_user
        with pytest.raises(PermissionDenied):
            view(request)
        request.user = admin_user
        assert view(request).status_code == 200


@pytest.mark.django_db
def test_staff_for_writes_lets_viewers_read(rf, admin_user, viewer_user):
    view = staff_for_writes(message="writes are for staff")(_view)
    read = rf.get("/")
    read.user = viewer_user
    assert view(read).status_code == 200
    write = rf.post("/")
    write.user = viewer_user
    with pytest.raises(PermissionDenied, match="writes are for staff"):
        view(write)
    write.user = admin_user
    assert view(write).status_code == 200


# -- roles ----------------------------------------------------------------------------------------------
from django.contrib.auth.models import Group  # noqa: E402

from playground.access import ADMIN, EDITOR, OPERATOR, ROLES, VIEWER, has_role, role_for_writes, role_of, role_required  # noqa: E402


def _in_group(user, role):
    user.groups.add(Group.objects.get(name=role))
    return type(user).objects.get(pk=user.pk)  # a fresh object: no cached permissions


@pytest.mark.django_db
def test_the_migration_made_one_group_per_role_holding_its_permission():
    for role in ROLES:
        group = Group.objects.get(name=role)
        assert [f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()] == [f"accounts.role_{role}"]


@pytest.mark.django_db
def test_the_role_groups_migration_can_run_twice():
    from importlib import import_module

    from django.apps import apps

    migration = import_module("playground.accounts.migrations.0002_role_groups")
    migration.create_role_groups(apps, None)
    assert Group.objects.filter(name__in=ROLES).count() == 4
    assert all(Group.objects.get(name=r).permissions.count() == 1 for r in ROLES)


@pytest.mark.django_db
def test_default_roles_without_a_group(django_user_model):
    plain = django_user_model.objects.create_user("plain")
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    root = django_user_model.objects.create_user("root", is_superuser=True)
    assert role_of(plain) == OPERATOR and not has_role(plain, EDITOR) and has_role(plain, VIEWER)
    assert role_of(staff) == ADMIN
    assert role_of(root) == ADMIN
    assert role_of(AnonymousUser()) is None and role_of(None) is None
    assert not has_role(None, VIEWER)


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
def test_a_group_decides_the_role_even_for_staff(django_user_model, role):
    user = _in_group(django_user_model.objects.create_user("member", is_staff=True), role)
    assert role_of(user) == role
    assert [has_role(user, r) for r in ROLES] == [ROLES.index(r) <= ROLES.index(role) for r in ROLES]


@pytest.mark.django_db
def test_the_highest_role_wins(django_user_model):
    user = django_user_model.objects.create_user("both")
    user.groups.add(Group.objects.get(name=VIEWER))
    user = _in_group(user, EDITOR)
    assert role_of(user) == EDITOR


def test_unknown_roles_fail_early():
    with pytest.raises(ValueError):
        has_role(None, "owner")
    with pytest.raises(ValueError):
        role_required("owner")


@pytest.mark.django_db
def test_role_required_and_role_for_writes(rf, django_user_model):
    viewer = _in_group(django_user_model.objects.create_user("v"), VIEWER)
    editor = _in_group(django_user_model.objects.create_user("e"), EDITOR)
    only_editors = role_required(EDITOR)(_view)
    writes = role_for_writes(EDITOR)(_view)
    for method in ("get", "post"):
        request = getattr(rf, method)("/")
        request.user = viewer
        with pytest.raises(PermissionDenied):
            only_editors(request)
        request.user = editor
        assert only_editors(request).status_code == 200
    read, write = rf.get("/"), rf.post("/")
    read.user = write.user = viewer
    assert writes(read).status_code == 200
    with pytest.raises(PermissionDenied):
        writes(write)
