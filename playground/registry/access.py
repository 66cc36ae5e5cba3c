"""Who may do what in the registry: everyone logged in reads, staff writes."""
from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied


def staff_for_writes(view):
    """Login required; any method other than GET/HEAD needs a staff user (else 403)."""

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method not in ("GET", "HEAD") and not request.user.is_staff:
            raise PermissionDenied("Only staff can change the registry.")
        return view(request, *args, **kwargs)

    return wrapper


def staff_only(view):
    """Login required, and a staff user for every method (else 403)."""

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied("This page is for staff.")
        return view(request, *args, **kwargs)

    return wrapper
