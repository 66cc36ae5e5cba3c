"""The prompt inbox: every permission prompt the user may answer, live (consumers.py)."""
from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_safe

from playground.access import OPERATOR, role_required
from playground.inbox.selectors import inbox_cards


@role_required(OPERATOR)
@require_safe
def inbox(request):
    return render(request, "inbox/index.html", {"cards": inbox_cards(request.user), "inbox_page": True})
