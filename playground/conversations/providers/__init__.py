"""Model providers by key (settings.MODEL_PROVIDERS: key → dotted path of a ModelProvider subclass)."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from playground.conversations.providers.base import ModelProvider, ProviderError, ProviderResponse, plain_extract

__all__ = ["ModelProvider", "ProviderError", "ProviderResponse", "plain_extract", "get_provider", "provider_key_for",
           "conversation_provider_key", "provider_class", "provider_choices", "provider_label"]

AUTO = ""
AUTO_LABEL = "Automatic (Claude with an API key, else the offline demo agent)"


def provider_class(key: str) -> type[ModelProvider]:
    try:
        path = settings.MODEL_PROVIDERS[key]
    except KeyError:
        raise ProviderError(f"unknown model provider {key!r}; known: {', '.join(sorted(settings.MODEL_PROVIDERS))}",
                            kind="configuration") from None
    return import_string(path)


def provider_key_for(requested: str = AUTO, profile: object | None = None) -> str:
    """The provider a conversation uses: an explicit choice, then the profile's, then the API key rule."""
    forced = requested or getattr(profile, "provider", "") or ""
    if forced:
        return forced
    return "anthropic" if settings.ANTHROPIC_API_KEY else "demo"


def conversation_provider_key(conversation: Any) -> str:
    """A conversation's provider: its own choice, then the one its profile had when it started."""
    snapshot = conversation.profile_snapshot or {}
    return provider_key_for(conversation.provider or snapshot.get("provider", ""), conversation.profile)


def get_provider(key: str) -> ModelProvider:
    return provider_class(key).from_settings()


def provider_choices() -> list[tuple[str, str]]:
    """Form choices: automatic, then every configured provider that can be imported."""
    choices = [(AUTO, AUTO_LABEL)]
    for key in settings.MODEL_PROVIDERS:
        try:
            choices.append((key, provider_class(key).label))
        except ImportError:
            continue
    return choices


def provider_label(key: str) -> str:
    return dict(provider_choices()).get(key, key)
