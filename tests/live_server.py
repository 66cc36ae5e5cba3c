"""Helpers for tests that start the project's servers in other processes (browser tests, gateway)."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import quote


def database_url_for(settings_dict: dict) -> str:
    """A DATABASE_URL that points another process at the database this test process uses."""
    if "sqlite" in settings_dict["ENGINE"]:
        return f"sqlite:///{Path(settings_dict['NAME']).resolve()}"
    credentials = quote(settings_dict.get("USER") or "", safe="")
    if settings_dict.get("PASSWORD"):
        credentials += ":" + quote(settings_dict["PASSWORD"], safe="")
    host = settings_dict.get("HOST") or "localhost"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{credentials}@{host}:{port}/{quote(settings_dict['NAME'], safe='')}"
