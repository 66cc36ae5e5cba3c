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
