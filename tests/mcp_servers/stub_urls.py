"""URLconf for page tests while other apps' pages are not merged yet.

`templates/base.html` links pages of every app; on a branch where an app's URL names do not exist
yet, the project's URLconf cannot render any page. The `_page_urls` fixture (conftest) switches
to this module only in that case: the real project URLs plus placeholders for the missing names.
"""
from __future__ import annotations

from django.http import HttpResponse
from django.urls import NoReverseMatch, include, path, reverse

from playground import urls as project_urls

NAV_NAMES = {
    "registry": ["tool_list", "inspector", "model_view", "permissions", "profile_list"],
    "conversations": ["list"],
    "evaluation": ["index"],
}


def _placeholder(request, *args, **kwargs):
    return HttpResponse("placeholder page (not merged on this branch)")


def missing_nav_names(urlconf: str = "playground.urls") -> dict[str, list[str]]:
    missing: dict[str, list[str]] = {}
    for namespace, names in NAV_NAMES.items():
        for name in names:
            try:
                reverse(f"{namespace}:{name}", urlconf=urlconf)
            except NoReverseMatch:
                missing.setdefault(namespace, []).append(name)
    return missing


_missing = missing_nav_names()
urlpatterns = [p for p in project_urls.urlpatterns if getattr(p, "namespace", None) not in _missing]
for _namespace, _names in _missing.items():
    _stubs = [path(f"__stub__/{_namespace}/{name}/", _placeholder, name=name) for name in _names]
    urlpatterns.append(path("", include((_stubs, _namespace))))
