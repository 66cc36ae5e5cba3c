"""The evaluation form shows a backend that cannot run here (postgres without PostgreSQL) disabled, and refuses it."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_postgres(monkeypatch):
    monkeypatch.delenv("TOOLSEARCH_PG_DSN", raising=False)
    monkeypatch.setenv("DATABASE_URL", "sqlite:///x.sqlite3")


def test_the_evaluation_form_disables_and_refuses_postgres(admin_client, toy_toolsets):
    body = admin_client.get(reverse("evaluation:index")).content.decode()
    box = re.search(r'<input type="checkbox" name="backends" value="postgres"[^>]*>', body).group(0)
    assert " disabled" in box
    assert "postgres — unavailable: needs PostgreSQL" in body
    response = admin_client.post(reverse("evaluation:index"), {"toolset": "toy", "backends": ["bm25", "postgres"],
                                                              "query_style": "natural", "split": "all"})
    assert response.status_code == 200 and "postgres needs PostgreSQL" in response.content.decode()
