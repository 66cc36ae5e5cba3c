from __future__ import annotations

from django import forms
from django.conf import settings

from playground.conversations.providers import provider_choices, provider_key_for, provider_label
from playground.conversations.services import MAX_MESSAGE_CHARS, PERMISSION_CHOICES
from playground.registry import availability
from playground.registry.models import AgentProfile

ENTER_HINT = "Enter sends · Shift+Enter for a new line"


def offer_runnable_providers(field: forms.ChoiceField) -> None:
    """A provider that cannot start here (Claude without ANTHROPIC_API_KEY) is shown disabled, with the fix."""
    availability.mark_unavailable(field, {key: availability.provider_unavailable(key) for key, _label in field.choices})


def profile_run_problem(profile: AgentProfile | None, requested_provider: str = "") -> str:
    """Why a conversation with this profile (None: default settings) and provider choice would fail at run time."""
    key = provider_key_for(requested_provider, profile)
    name = f"Profile {profile.name!r}" if profile is not None else "The default settings"
    reason = availability.provider_unavailable(key)
    if reason:
        return f"{provider_label(key)} cannot run here ({reason}). Choose the offline demo agent as the provider."
    reason = availability.wire_style_unavailable(getattr(profile, "wire_style", ""), key)
    if reason:
        return f"{name}: {reason}. Choose another profile, or set ANTHROPIC_API_KEY and choose Claude."
    spec = getattr(profile, "search_backend", "") or ""
    reason = availability.backend_unavailable(spec)
    if reason:
        return f"{name}: the search backend {(spec or settings.TOOLSEARCH_DEFAULT_BACKEND).partition(':')[0]!r} {reason}."
    return ""


def refuse_what_cannot_run(form: forms.Form, profiles: list, provider: str) -> None:
    """Refuse, before a run starts, a provider or profile the run would fail on (a disabled option can still be posted)."""
    for profile in dict.fromkeys(profiles):  # the same profile twice (compare) is one message
        problem = profile_run_problem(profile, provider)
        if problem:
            form.add_error(None, problem)


class NewConversationForm(forms.Form):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                     empty_label="Default settings")
    provider = forms.ChoiceField(choices=(), required=False)
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What time is it in Tokyo?", "data-enter-sends": ""}),
                              help_text=ENTER_HINT,
                              required=False, max_length=MAX_MESSAGE_CHARS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = provider_choices()
        offer_runnable_providers(self.fields["provider"])

    def clean(self):
        cleaned = super().clean()
        refuse_what_cannot_run(self, [cleaned.get("profile")], cleaned.get("provider") or "")
        return cleaned


class MessageForm(forms.Form):
    text = forms.CharField(max_length=MAX_MESSAGE_CHARS)


class AnswerForm(forms.Form):
    prompt = forms.IntegerField(min_value=1)
    choice = forms.ChoiceField(choices=list(PERMISSION_CHOICES.items()))


class CompareForm(forms.Form):
    profile_a = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                       empty_label="Default settings", label="Left profile")
    profile_b = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                       empty_label="Default settings", label="Right profile")
    provider = forms.ChoiceField(choices=(), required=False)
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What time is it in Tokyo?", "data-enter-sends": ""}),
                              help_text=ENTER_HINT,
                              max_length=MAX_MESSAGE_CHARS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = provider_choices()
        offer_runnable_providers(self.fields["provider"])

    def clean(self):
        cleaned = super().clean()
        refuse_what_cannot_run(self, [cleaned.get("profile_a"), cleaned.get("profile_b")], cleaned.get("provider") or "")
        return cleaned
