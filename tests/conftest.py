"""Shared test fixtures: the small world of users, and service checks.

Services: under CI (CI=true) a missing PostgreSQL or Redis fails the run; on a developer's machine
tests that need them skip with a clear reason.
"""
from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def require_service(available: bool, what: str) -> None:
    if available:
        return
    if IN_CI:
        pytest.fail(f"{what} is required under CI=true but is not reachable")
    pytest.skip(f"{what} is not reachable on this machine")


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_user("alice", "alice@example.com", "pw-alice-123", is_staff=True, is_superuser=True)


@pytest.fixture
def viewer_user(django_user_model):
    return django_user_model.objects.create_user("bob", "bob@example.com", "pw-bob-12345")


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def viewer_client(client, viewer_user):
    client.force_login(viewer_user)
    return client
