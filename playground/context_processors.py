from __future__ import annotations

from playground.access import ADMIN, OPERATOR, ROLES, has_role, role_of
from playground.conversations import budgets
from playground.conversations.providers import automatic_provider_key, provider_is_offline
from playground.inbox.selectors import inbox_count


def playground(request):
    """What every page's chrome needs: whether a real model is configured (else the demo agent runs),
    and the user's role. Templates show controls from `has_role.<role>` (`{% if has_role.editor %}`),
    never from `user.is_staff`; `is_staff` stays as the admin level for older templates."""
    user = getattr(request, "user", None)
    is_admin = has_role(user, ADMIN)
    return {
        # The automatic choice's rule, asked rather than restated (Claude with a key, else the demo agent).
        "has_model_key": not provider_is_offline(automatic_provider_key()),
        "user_role": role_of(user) or "",
        "has_role": {role: has_role(user, role) for role in ROLES},
        "is_staff": is_admin,
        # Called only by a template that shows them (the navigation bar): not by every htmx fragment.
        "inbox_count": lambda: inbox_count(user) if has_role(user, OPERATOR) else 0,
        # Admins are told in the navigation when a budget is reached (new work of its user or profile is refused).
        "budgets_reached": lambda: budgets.reached_count() if is_admin else 0,
    }
