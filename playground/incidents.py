"""Unexpected errors: a generic message for the person or client, the details in the log.

Database errors quote the SQL they failed on and exceptions carry internals (table columns, ids,
paths); none of it belongs in an answer. `report_unexpected` logs the exception with a short
reference and returns the sentence to show, which names the same reference, so an operator finds
the log line from what the person saw.
"""
from __future__ import annotations

import logging
import secrets

logger = logging.getLogger("playground.incidents")


def new_reference() -> str:
    return secrets.token_hex(6)


def report_unexpected(what: str, exc: BaseException | None = None, *, log: logging.Logger | None = None) -> str:
    """Log `exc` (the one being handled when None) under a new reference; the message to show."""
    reference = new_reference()
    (log or logger).error("unexpected error in %s (reference %s)", what, reference,
                          exc_info=exc if exc is not None else True)
    return f"Unexpected error in {what} (reference {reference}); the server log has the details."


def _expected() -> tuple[type[BaseException], ...]:
    from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
    from django.http import Http404
    from django.http.multipartparser import MultiPartParserError

    return (Http404, PermissionDenied, BadRequest, SuspiciousOperation, MultiPartParserError)


class UnexpectedErrorMiddleware:
    """A view's unexpected exception becomes a plain 500 with a reference that the log line carries,
    never a stack or a database message (with DEBUG on, Django's debug page is left alone)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from django.conf import settings
        from django.http import HttpResponseServerError

        if settings.DEBUG or isinstance(exception, _expected()):
            return None  # Django answers these itself: 404, 403, 400
        message = report_unexpected(f"{request.method} {request.path}", exception)
        return HttpResponseServerError(message, content_type="text/plain; charset=utf-8")
