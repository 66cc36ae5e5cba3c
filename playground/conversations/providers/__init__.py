"""Model providers by key (settings.MODEL_PROVIDERS: key → dotted path of a ModelProvider subclass)."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from playground.conversations.providers.base import ModelProvider, ProviderError, ProviderResponse, plain_extract

__all__ = ["ModelProvider", "ProviderError", "ProviderResponse", "plain_extract", "get_provider", "provider_key_for", "stand_in_for",
           "conversation_provider_key", "provider_class", "provider_choices", "provider_label", "automatic_provider_key",
           "estimating_provider_keys", "otel_provider_name", "provider_estimates_usage", "provider_is_offline",
           "vendor_provider_keys"]

AUTO = ""
# "Automatic": the first provider that can run here (`unavailable_reason`), the last one always.
AUTOMATIC_ORDER = ("anthropic", "demo")
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
    return automatic_provider_key()


def automatic_provider_key() -> str:
    """The provider of a conversation whose profile names none: Claude with an API key, else the
    offline demo agent (`AUTOMATIC_ORDER`, each asked whether it can run here)."""
    *preferred, last = AUTOMATIC_ORDER
    for key in preferred:
        try:
            if not provider_class(key).unavailable_reason():
                return key
        except (ProviderError, ImportError):
            continue
    return last


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


def _fact(key: str, name: str, default: Any) -> Any:
    """A fact a provider's class states; `default` for a key no configured class answers (a
    provider since removed from MODEL_PROVIDERS, read from an old event)."""
    try:
        return getattr(provider_class(key), name)
    except (ProviderError, ImportError):
        return default


def otel_provider_name(key: str) -> str:
    """gen_ai.provider.name for a provider key (the key itself when no class names it)."""
    return _fact(key, "otel_name", "") or key


def provider_is_offline(key: str) -> bool:
    """Whether the provider is the offline demo agent (on either vendor's wire): pages label it."""
    return bool(_fact(key, "offline", False))


def provider_estimates_usage(key: str) -> bool:
    """Whether the provider's usage is the engine's estimate, not an API's report."""
    return bool(_fact(key, "estimates_usage", False))


def estimating_provider_keys() -> frozenset[str]:
    """The configured providers whose usage is the engine's estimate: how a model response saved
    before responses said where their usage came from is read."""
    return frozenset(key for key in settings.MODEL_PROVIDERS if provider_estimates_usage(key))


def vendor_provider_keys(vendor: str) -> tuple[str, str]:
    """(the configured provider that calls `vendor`'s API, the offline one on that vendor's wire),
    read from the classes' `vendor` and `offline`: ("anthropic", "demo"), ("openai", "demo-openai")."""
    found = {False: "", True: ""}
    for key in settings.MODEL_PROVIDERS:
        try:
            cls = provider_class(key)
        except (ProviderError, ImportError):
            continue
        if cls.vendor == vendor and not found[bool(cls.offline)]:
            found[bool(cls.offline)] = key
    return found[False], found[True]
