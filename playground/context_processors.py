from __future__ import annotations

from django.conf import settings

from playground.access import ADMIN, ROLES, has_role, role_of


def playground(request):
    """What every page's chrome needs: whether a real model is configured (else the demo agent runs),
    and the user's role. Templates show controls from `has_role.<role>` (`{% if has_role.editor %}`),
    never from `user.is_staff`; `is_staff` stays as the admin level for older templates."""
    user = getattr(request, "user", None)
    return {
        "has_model_key": bool(settings.ANTHROPIC_API_KEY),
        "user_role": role_of(user) or "",
        "has_role": {role: has_role(user, role) for role in ROLES},
        "is_staff": has_role(user, ADMIN),
    }
