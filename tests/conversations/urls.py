"""Test-only URLconf: the project's URLs plus placeholders for nav pages of apps not merged on this branch."""
from __future__ import annotations

from django.http import HttpResponse
from django.urls import NoReverseMatch, include, path, reverse

from playground.urls import urlpatterns as project_urlpatterns

NAV = {"registry": ["tool_list", "inspector", "model_view", "permissions", "profile_list"],
       "mcp_servers": ["server_list"], "evaluation": ["index"]}


def placeholder(request, *args, **kwargs):
    return HttpResponse("placeholder for a page on another branch")


def _missing() -> set[str]:
    missing = set()
    for namespace, names in NAV.items():
        for name in names:
            try:
                reverse(f"{namespace}:{name}", urlconf="playground.urls")
            except NoReverseMatch:
                missing.add(namespace)
    return missing


_absent = _missing()
urlpatterns = [p for p in project_urlpatterns if getattr(p, "namespace", None) not in _absent]
for _namespace in sorted(_absent):
    urlpatterns.append(path(f"placeholder-{_namespace}/", include(
        ([path(f"{n}/", placeholder, name=n) for n in NAV[_namespace]], _namespace))))
