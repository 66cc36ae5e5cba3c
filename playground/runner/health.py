"""Is the web server answering? Shared by `make run` and the container health check.

The probe sends the first ALLOWED_HOSTS entry as Host (Django rejects unknown hosts) and
`X-Forwarded-Proto: https` (with DEBUG off, SECURE_SSL_REDIRECT would otherwise answer every plain
http request with a redirect) and does not follow redirects.
"""
from __future__ import annotations

import os
import urllib.error
import urllib.request


def probe_host() -> str:
    for host in os.environ.get("ALLOWED_HOSTS", "localhost").split(","):
        host = host.strip().lstrip(".")
        if host and host != "*":
            return host
    return "localhost"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def healthz_status(base_url: str, timeout: float = 5.0) -> int | None:
    """HTTP status of GET {base_url}/healthz, or None when nothing answers."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/healthz",
        headers={"Host": probe_host(), "X-Forwarded-Proto": "https"},
    )
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return None
