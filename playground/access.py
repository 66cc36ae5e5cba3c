"""Who may do what, in one place: four roles, each one the one below plus more.

* viewer   — reads the registry (tools, profiles, MCP servers), the inspector, "what the model
  sees" and evaluation results;
* operator — + starts and runs their own conversations and answers their own permission prompts;
* editor   — + changes tools, profiles, permission rules, imports, starts evaluation runs;
* admin    — + MCP server definitions (stdio commands run on the web and worker hosts), other
  users' conversations, and assigning roles.

A role is a Django group of the same name holding that role's permission (`accounts.role_<name>`,
created by the accounts app's data migration); a user's role is the highest role permission they
hold, through a group or directly. Superusers are admins. A user holding no role permission keeps
what the staff flag gave before roles existed: staff → admin, anyone else → operator (plain users
have always run their own conversations).

Views use `role_required(role)` (or `role_for_writes(role)`: reads for every viewer); code that has
a user but no view to decorate (sockets, selectors, templates through the context processor) asks
`has_role(user, role)`. `is_staff`, `staff_required`, `staff_for_writes` and `require_staff` stay as
thin aliases of the admin / editor levels. This module imports only Django, so every app may import it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, Callable

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

READ_METHODS = ("GET", "HEAD")


class QuietPermissionDenied(logging.Filter):
    """Django logs each 403 with the PermissionDenied's traceback; a refused role is expected, not a
    fault: keep the line ("Forbidden (Permission denied): /users/"), drop the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PermissionDenied):
            record.exc_info, record.exc_text = None, None
        return True

VIEWER, OPERATOR, EDITOR, ADMIN = "viewer", "operator", "editor", "admin"
ROLES = (VIEWER, OPERATOR, EDITOR, ADMIN)  # lowest first; each includes the ones before it
ROLE_LABELS = {
    VIEWER: "Viewer: reads the registry, inspector, model view and evaluation results",
    OPERATOR: "Operator: + runs their own conversations",
    EDITOR: "Editor: + tools, profiles, permission rules, imports, evaluation runs",
    ADMIN: "Admin: + MCP servers, other users' conversations, roles",
}
PERMISSION_APP = "accounts"


def role_permission(role: str) -> str:
    """The codename of the permission that makes a user `role` (`role_editor`)."""
    return f"role_{role}"


def is_signed_in(user: Any) -> bool:
    return bool(user is not None and getattr(user, "is_authenticated", False))


def role_of(user: Any) -> str | None:
    """The user's role, None for anonymous users. Cached on the user object (one permission read)."""
    if not is_signed_in(user) or not getattr(user, "is_active", True):
        return None
    cached = getattr(user, "_playground_role", None)
    if cached is not None:
        return cached
    if getattr(user, "is_superuser", False):
        role = ADMIN
    else:
        held = user.get_all_permissions()
        granted = [r for r in ROLES if f"{PERMISSION_APP}.{role_permission(r)}" in held]
        # No role given: what the staff flag meant before roles (see the module docstring).
        role = granted[-1] if granted else (ADMIN if getattr(user, "is_staff", False) else OPERATOR)
    try:
        user._playground_role = role
    except AttributeError:  # a user-like object that takes no attributes: just don't cache
        pass
    return role


def forget_role(user: Any) -> None:
    """Drop the cached role (and Django's permission caches) after the user's groups changed."""
    for name in ("_playground_role", "_perm_cache", "_user_perm_cache", "_group_perm_cache"):
        if hasattr(user, name):
            delattr(user, name)


def has_role(user: Any, role: str) -> bool:
    """Whether `user` is at least `role`. Anonymous users and None have no role."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (roles: {', '.join(ROLES)})")
    held = role_of(user)
    return held is not None and ROLES.index(held) >= ROLES.index(role)


def require_role(user: Any, role: str, message: str = "") -> None:
    """Raise PermissionDenied (a 403) unless `user` is at least `role`; for checks that are not a whole view."""
    if not has_role(user, role):
        raise PermissionDenied(message or f"This needs the {role} role.")


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


def role_required(role: str, *, message: str = ""):
    """Login required, and at least `role` for every method (else 403)."""
    has_role(None, role)  # an unknown role fails at import time, not on the first request
    text = message or f"This page needs the {role} role."
    return _decorator(lambda request: has_role(request.user, role), text)(message=text)


def role_for_writes(role: str, *, message: str = ""):
    """Login required and the viewer role to read (GET/HEAD); any other method needs at least `role`."""
    has_role(None, role)
    text = message or f"Changes need the {role} role."
    return _decorator(
        lambda request: has_role(request.user, VIEWER) and (request.method in READ_METHODS or has_role(request.user, role)), text
    )(message=text)


# -- the names used before roles existed --------------------------------------------------------------
def is_staff(user: Any) -> bool:
    """An admin (what "staff" meant: sees and changes everything). Anonymous users and None are not."""
    return has_role(user, ADMIN)


def require_staff(user: Any, message: str = "This page is for admins.") -> None:
    require_role(user, ADMIN, message)


# Login required and the editor role for every method (else 403): the registry's change pages.
staff_required = _decorator(lambda request: has_role(request.user, EDITOR), "This page is for editors.")

# Login required; any method other than GET/HEAD needs the editor role (else 403).
staff_for_writes = _decorator(
    lambda request: request.method in READ_METHODS or has_role(request.user, EDITOR), "Only editors can make changes."
)


# -- the authorisation matrix: what each route answers, declared next to the route ---------------------
PUBLIC = "public"  # no login needed
OK, LOGIN, FORBIDDEN, HIDDEN, NOT_ALLOWED = "ok", "login", "forbidden", "hidden", "not_allowed"


@dataclass(frozen=True)
class Rule:
    """The least role each method needs (`PUBLIC`, a role, or absent: 405 for that method).

    `owned`: the route is about one user's object (a conversation); below admin only its owner gets
    it, anyone else gets a 404 (`HIDDEN`), so ids of others' objects are not confirmed.
    `delegated`: the route checks its own access (Django's admin site); the matrix test checks only
    that roles without Django's staff flag are kept out.
    """

    methods: dict[str, str] = field(default_factory=dict)
    owned: bool = False
    delegated: bool = False
    note: str = ""

    def expected(self, method: str, role: str | None, *, owner: bool = False) -> set[str]:
        """The outcome classes allowed for `role` (None: anonymous) using `method`.

        A declared method has exactly one outcome. A method not declared must be refused: with a
        405, or with the login redirect / 403 that its access check gives first (decorator order).
        """
        needed = self.methods.get(method.upper())
        if needed is None:
            refusals = {NOT_ALLOWED}
            lowest = [r for r in self.methods.values() if r != PUBLIC]
            if role is None and lowest:
                refusals.add(LOGIN)
            if role is not None and lowest and ROLES.index(role) < min(ROLES.index(r) for r in lowest):
                refusals.add(FORBIDDEN)
            return refusals
        if needed == PUBLIC:
            return {OK}
        if role is None:
            return {LOGIN}
        if ROLES.index(role) < ROLES.index(needed):
            return {FORBIDDEN}
        if self.owned and not owner and role != ADMIN:
            return {HIDDEN}
        return {OK}


def allow(get: str | None = None, post: str | None = None, *, owned: bool = False, note: str = "") -> Rule:
    """A route's rule: `allow(get=VIEWER, post=EDITOR)`; a method left out answers 405."""
    methods = {}
    if get is not None:
        methods["GET"] = get
    if post is not None:
        methods["POST"] = post
    return Rule(methods, owned=owned, note=note)


def allow_socket(role: str, *, owned: bool = False) -> Rule:
    """A WebSocket route's rule: the least role that may connect (the refusals: 4401 anonymous, 4403 others)."""
    return Rule({"CONNECT": role}, owned=owned)


def delegated(note: str) -> Rule:
    """A whole included URLconf (Django's admin site) that checks access itself."""
    return Rule({}, delegated=True, note=note)
