"""The Users page: admins see every user's role and assign roles (POST, recorded); nobody else gets in."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from playground.access import role_of
from playground.accounts.models import RoleChange

pytestmark = pytest.mark.django_db


def _fresh(user):
    return type(user).objects.get(pk=user.pk)


def test_admins_see_users_with_their_roles(admin_client, viewer_user):
    response = admin_client.get(reverse("accounts:users"))
    assert response.status_code == 200
    rows = {r["user"].username: (r["role"], r["source"]) for r in response.context["rows"]}
    assert rows == {"alice": ("admin", "superuser"), "bob": ("operator", "default")}
    assert f'action="{reverse("accounts:set_role", args=[viewer_user.pk])}"' in response.content.decode()
    assert 'href="/users/"' in response.content.decode()  # the nav link, for admins only


def test_assigning_a_role_moves_the_user_and_is_recorded(admin_client, admin_user, viewer_user):
    url = reverse("accounts:set_role", args=[viewer_user.pk])
    assert admin_client.post(url, {"role": "editor"}).status_code == 302
    assert role_of(_fresh(viewer_user)) == "editor"
    assert list(_fresh(viewer_user).groups.values_list("name", flat=True)) == ["editor"]
    admin_client.post(url, {"role": "viewer"})
    assert role_of(_fresh(viewer_user)) == "viewer"
    assert list(_fresh(viewer_user).groups.values_list("name", flat=True)) == ["viewer"]
    admin_client.post(url, {"role": ""})  # back to the default: a plain user is an operator
    assert role_of(_fresh(viewer_user)) == "operator" and not _fresh(viewer_user).groups.exists()
    changes = [(c.before, c.after, c.changed_by_id) for c in RoleChange.objects.order_by("id")]
    assert changes == [("operator", "editor", admin_user.pk), ("editor", "viewer", admin_user.pk), ("viewer", "", admin_user.pk)]
    assert "editor" in admin_client.get(reverse("accounts:users")).content.decode()


def test_a_staff_user_demoted_to_editor_loses_admin_powers(client, admin_client, django_user_model):
    staff = django_user_model.objects.create_user("carol", is_staff=True)
    assert role_of(staff) == "admin"
    admin_client.post(reverse("accounts:set_role", args=[staff.pk]), {"role": "editor"})
    client.force_login(staff)
    assert client.get(reverse("accounts:users")).status_code == 403
    assert client.get(reverse("mcp_servers:server_create")).status_code == 403
    assert client.get(reverse("registry:tool_create")).status_code == 200


def test_no_changing_your_own_role_or_a_superusers(client, django_user_model, admin_user):
    other_admin = django_user_model.objects.create_user("dave")
    other_admin.groups.add(Group.objects.get(name="admin"))
    client.force_login(other_admin)
    client.post(reverse("accounts:set_role", args=[other_admin.pk]), {"role": "viewer"})
    client.post(reverse("accounts:set_role", args=[admin_user.pk]), {"role": "viewer"})
    assert role_of(_fresh(other_admin)) == "admin" and role_of(_fresh(admin_user)) == "admin"
    assert not RoleChange.objects.exists()
    response = client.post(reverse("accounts:set_role", args=[admin_user.pk]), {"role": "nonsense"}, follow=True)
    assert response.status_code == 200 and not RoleChange.objects.exists()


def test_only_admins_get_in_and_only_by_post(client, viewer_user, admin_user):
    from django.test import Client

    viewer_client, admin_client = Client(), Client()
    viewer_client.force_login(viewer_user)
    admin_client.force_login(admin_user)
    assert client.get(reverse("accounts:users")).status_code == 302
    assert viewer_client.get(reverse("accounts:users")).status_code == 403
    assert viewer_client.post(reverse("accounts:set_role", args=[viewer_user.pk]), {"role": "admin"}).status_code == 403
    assert role_of(_fresh(viewer_user)) == "operator"
    assert admin_client.get(reverse("accounts:set_role", args=[viewer_user.pk])).status_code == 405
    assert 'href="/users/"' not in viewer_client.get(reverse("home")).content.decode()


def test_the_role_form_needs_a_csrf_token(admin_user, viewer_user):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    assert strict.post(reverse("accounts:set_role", args=[viewer_user.pk]), {"role": "admin"}).status_code == 403
    assert role_of(_fresh(viewer_user)) == "operator"


def test_an_admin_creates_a_user_who_starts_as_viewer(admin_client, admin_user, client):
    # Before: the page could not create a user nor said where, and a new account was an operator.
    page = admin_client.get(reverse("accounts:users")).content.decode()
    assert 'data-testid="new-user-form"' in page and '<option value="viewer" selected>' in page
    response = admin_client.post(reverse("accounts:create_user"),
                                 {"username": "vic", "password1": "a-long-pass-phrase-1", "password2": "a-long-pass-phrase-1", "role": "viewer"})
    assert response.status_code == 302
    vic = get_user_model().objects.get(username="vic")
    assert role_of(vic) == "viewer" and vic.check_password("a-long-pass-phrase-1")
    assert RoleChange.objects.filter(user=vic, changed_by=admin_user, before="", after="viewer").exists()
    client.force_login(vic)
    assert client.get(reverse("conversations:new")).status_code == 403  # watches, starts nothing


@pytest.mark.parametrize("fields, message", [
    ({"username": "alice", "password1": "a-long-pass-phrase-1", "password2": "a-long-pass-phrase-1"}, "already exists"),
    ({"username": "newbie", "password1": "a-long-pass-phrase-1", "password2": "another-pass-phrase-2"}, "didn"),
    ({"username": "newbie", "password1": "123", "password2": "123"}, "too short"),
])
def test_a_bad_new_user_is_a_form_error(admin_client, fields, message):
    response = admin_client.post(reverse("accounts:create_user"), {**fields, "role": "viewer"})
    assert response.status_code == 400 and message in response.content.decode()
    assert not get_user_model().objects.filter(username="newbie").exists()


def test_an_account_made_in_djangos_admin_starts_as_viewer(admin_client):
    response = admin_client.post(reverse("admin:auth_user_add"),
                                 {"username": "dora", "password1": "a-long-pass-phrase-1", "password2": "a-long-pass-phrase-1",
                                  "usable_password": "true"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert role_of(get_user_model().objects.get(username="dora")) == "viewer"
