"""Test-only URLconf: the project's URLs, with placeholders for other apps' pages that the shared
navigation links to but that are not on this branch yet (used only while they are missing)."""
from __future__ import annotations

from django.http import HttpResponse
from django.urls import NoReverseMatch, include, path, reverse

from playground.urls import urlpatterns as project_urlpatterns

# namespace → [(route, name)] the shared navigation reverses.
NEEDED = {
    "registry": [("tools/", "tool_list"), ("inspector/", "inspector"), ("model/", "model_view"),
                 ("permissions/", "permissions"), ("profiles/", "profile_list")],
    "mcp_servers": [("", "server_list")],
    "conversations": [("", "list")],
}


def placeholder(request, *args, **kwargs):
    return HttpResponse("placeholder for a page on another branch")


def missing_namespaces(urlconf: str = "playground.urls") -> set[str]:
    missing = set()
    for namespace, routes in NEEDED.items():
        for _route, name in routes:
            try:
                reverse(f"{namespace}:{name}", urlconf=urlconf)
            except NoReverseMatch:
                missing.add(namespace)
    return missing


_missing = missing_namespaces()
urlpatterns = [p for p in project_urlpatterns if getattr(p, "namespace", None) not in _missing]
for _namespace in sorted(_missing):
    urlpatterns.append(
        path(f"placeholder-{_namespace}/", include(([path(r, placeholder, name=n) for r, n in NEEDED[_namespace]], _namespace)))
    )
