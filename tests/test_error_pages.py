"""What a refused request looks like: a 403 page in the site's frame, one log line without a
traceback; and the favicon a browser asks for on pages that name none."""
from __future__ import annotations

import logging

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.contrib.staticfiles import finders
from django.urls import reverse
from django.utils.log import configure_logging

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(client, django_user_model):
    user = django_user_model.objects.create_user("vera")
    user.groups.add(Group.objects.get(name="viewer"))
    client.force_login(user)
    return client


def test_a_403_page_says_why_in_the_sites_frame(viewer):
    response = viewer.get(reverse("accounts:users"))
    assert response.status_code == 403
    body = response.content.decode()
    # Before: Django's bare "<h1>403 Forbidden</h1><p></p>", no navigation, no reason.
    assert 'data-page="forbidden"' in body and 'class="topbar"' in body
    assert "Only admins can see users and assign roles." in body and "the role <strong>viewer</strong>" in body
    assert f'href="{reverse("home")}"' in body


def test_a_403_is_logged_once_without_a_traceback(viewer, monkeypatch, settings):
    settings.DEBUG = True  # `make run`: Django's own console handler is active then
    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
    emitted: list[logging.LogRecord] = []
    monkeypatch.setattr(logging.StreamHandler, "emit", lambda handler, record: emitted.append(record))
    try:
        assert viewer.get(reverse("accounts:users")).status_code == 403
    finally:
        configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
    forbidden = [r for r in emitted if r.name == "django.request" and "Forbidden" in r.getMessage()]
    # Before: twice (Django's console handler and the root's), each with the PermissionDenied traceback.
    assert len(forbidden) == 1 and forbidden[0].exc_info is None, [(r.name, bool(r.exc_info)) for r in forbidden]


def test_a_real_error_keeps_its_traceback():
    from playground.access import QuietPermissionDenied

    try:
        raise ValueError("boom")
    except ValueError as exc:
        record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "Internal Server Error", None, (type(exc), exc, None))
    assert QuietPermissionDenied().filter(record) and record.exc_info is not None


def test_the_favicon_is_served_where_browsers_look(client):
    response = client.get("/favicon.ico")  # before: 404 (only pages with the <link> found the icon)
    assert response.status_code == 301 and response["Location"].endswith("img/favicon.svg")
    assert finders.find("img/favicon.svg")
    assert settings.STATIC_URL in response["Location"]
