from __future__ import annotations

from django.conf import settings


def playground(request):
    """What every page's chrome needs: whether a real model is configured (else the demo agent runs)."""
    return {"has_model_key": bool(settings.ANTHROPIC_API_KEY)}
