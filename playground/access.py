"""Who may do what, in one place: everyone logged in reads, staff change things.

Views use the decorators (`staff_required`, `staff_for_writes`); code that has a user but no view to
decorate (sockets, selectors, templates through the context processor) asks `is_staff(user)`.
This module imports only Django, so every app may import it.
"""
from __future__ import annotations

from functools import wraps
from typing import Any, Callable

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

READ_METHODS = ("GET", "HEAD")


def is_signed_in(user: Any) -> bool:
    return bool(user is not None and getattr(user, "is_authenticated", False))


def is_staff(user: Any) -> bool:
    """A signed-in staff user. Anonymous users and None are not staff."""
    return bool(is_signed_in(user) and getattr(user, "is_staff", False))


def require_staff(user: Any, message: str = "This page is for staff.") -> None:
    """Raise PermissionDenied (a 403) unless `user` is staff; for checks that are not a whole view."""
    if not is_staff(user):
        raise PermissionDenied(message)


def _decorator(check: Callable[[Any], bool], default_message: str):
    """Build a decorator usable bare (`@deco`) or with a message (`@deco(message="...")`)."""

    def build(view=None, *, message: str = default_message):
        def decorate(view):
            @login_required
            @wraps(view)
            def wrapper(request, *args, **kwargs):
                if not check(request):
                    raise PermissionDenied(message)
                return view(request, *args, **kwargs)

            return wrapper

        return decorate(view) if view is not None else decorate

    return build


# Login required, and a staff user for every method (else 403).
staff_required = _decorator(lambda request: is_staff(request.user), "This page is for staff.")

# Login required; any method other than GET/HEAD needs a staff user (else 403).
staff_for_writes = _decorator(
    lambda request: request.method in READ_METHODS or is_staff(request.user), "Only staff can make changes."
)
