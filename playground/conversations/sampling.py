"""A profile's model answers an MCP server's sampling request from the workbench, on a person's word.

The workbench (mcp_servers, below this app) cannot call model providers; it queues this by name
(`conversations.answer_sampling_request`) and the worker asks the profile's provider — the one its
conversations would use (Claude with a key, else the offline demo agent, named as such in the answer;
OpenAI's, or its offline stand-in) — for a plain completion (`ModelProvider.complete`, which sends it
in the provider's own shape, with the model its conversations run), then settles the request the same
way a person's typed answer does (`server_requests.answer`), which wakes the waiting session.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model

from playground.conversations.providers import ProviderError, get_provider, provider_key_for
from playground.mcp_servers import server_requests
from playground.mcp_servers.models import McpServerRequest
from playground.registry import adapter
from playground.registry.models import AgentProfile

logger = logging.getLogger(__name__)


def answer_sampling_request(request_id: int, profile_id: int, user_id: int | None = None) -> str:
    """Ask the profile's model and send its answer; what happened, in a word."""
    row = McpServerRequest.objects.filter(pk=request_id, kind=McpServerRequest.Kind.SAMPLING).first()
    profile = AgentProfile.objects.filter(pk=profile_id).first()
    if row is None or profile is None or not row.is_pending:
        return "gone"
    key = provider_key_for("", profile)
    try:
        provider = get_provider(key)
        model = provider.adapt_settings(adapter.agent_settings(profile)).model  # what its conversations run
        asked = server_requests.sampling_completion(row.params, max_tokens_cap=settings.AGENT_MAX_TOKENS)
        response = provider.complete(asked.system, asked.messages, asked.max_tokens, model=model)
    except (ProviderError, ValueError) as exc:  # ValueError: profile settings the engine does not run
        why = exc.message if isinstance(exc, ProviderError) else str(exc)
        McpServerRequest.objects.filter(pk=row.pk, status=McpServerRequest.Status.PENDING).update(
            note=f"The model of profile {profile.name} could not answer: {why}. Answer by hand or decline.")
        server_requests.push(McpServerRequest.objects.get(pk=row.pk))
        return "failed"
    label = f"{provider.label} (profile {profile.name})" if provider.offline else f"{response.model or model} (profile {profile.name})"
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    text = response.text() or "(the model answered with no text)"
    answered = server_requests.answer(row.pk, status=McpServerRequest.Status.ANSWERED, user=user, with_label=label,
                                      result=server_requests.sampling_result(text, model=label))
    return "answered" if answered else "gone"
