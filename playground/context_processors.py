from __future__ import annotations

from django.conf import settings

from playground.access import is_staff


def playground(request):
    """What every page's chrome needs: whether a real model is configured (else the demo agent runs),
    and whether the user is staff (templates show staff controls from `is_staff`, not `user.is_staff`)."""
    return {"has_model_key": bool(settings.ANTHROPIC_API_KEY), "is_staff": is_staff(getattr(request, "user", None))}
