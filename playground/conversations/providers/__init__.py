"""Model providers by key (settings.MODEL_PROVIDERS: key → dotted path of a ModelProvider subclass)."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from playground.conversations.providers.base import ModelProvider, ProviderError, ProviderResponse, plain_extract

__all__ = ["ModelProvider", "ProviderError", "ProviderResponse", "plain_extract", "get_provider", "provider_key_for", "stand_in_for",
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


def provider_key_for(requested: str = AUTO, profile: object | None = None, *, profile_choice: str | None = None) -> str:
    """The provider a conversation uses: an explicit choice, then the profile's (`profile_choice`,
    else the profile's field), then the API key rule. A profile's provider that cannot run here
    (no API key) hands over to its offline stand-in when it has one (OpenAI → the offline demo
    agent on OpenAI's wire); an explicit choice is taken as it is."""
    if requested:
        return requested
    chosen = getattr(profile, "provider", "") or "" if profile_choice is None else profile_choice
    if chosen:
        return stand_in_for(chosen)
    return "anthropic" if settings.ANTHROPIC_API_KEY else "demo"


def stand_in_for(key: str) -> str:
    """`key`, or its offline stand-in when `key` cannot run here (ModelProvider.offline_stand_in)."""
    try:
        cls = provider_class(key)
    except (ProviderError, ImportError):
        return key
    return cls.offline_stand_in if cls.offline_stand_in and cls.unavailable_reason() else key


def conversation_provider_key(conversation: Any) -> str:
    """A conversation's provider: its own choice, then the one its profile had when it started."""
    snapshot = conversation.profile_snapshot or {}
    return provider_key_for(conversation.provider, conversation.profile,
                            profile_choice=snapshot.get("provider") or None)


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
