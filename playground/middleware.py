"""Request checks that every page needs before any view runs."""
from __future__ import annotations

from django.http import HttpResponseBadRequest


class RejectNulBytesMiddleware:
    """Answer 400 for a NUL byte in the path, a query parameter or a form value.

    No page takes one, and PostgreSQL refuses NUL in text ("A string literal cannot contain NUL"),
    so such a value would otherwise reach a query and end in a server error. Uploaded files are
    not looked at: a file's content is the view's to judge.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where = _nul_in(request)
        if where:
            return HttpResponseBadRequest(f"Bad request: the {where} contains a NUL byte (\\x00).", content_type="text/plain; charset=utf-8")
        return self.get_response(request)


def _nul_in(request) -> str:
    if "\x00" in request.path_info or "\x00" in request.path:
        return "path"
    if _has_nul(request.GET):
        return "query string"
    if request.method == "POST" and _has_nul(request.POST):
        return "form data"
    return ""


def _has_nul(data) -> bool:
    return any("\x00" in key or any("\x00" in value for value in values) for key, values in data.lists())
