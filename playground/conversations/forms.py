from __future__ import annotations

from django import forms

from playground.conversations.providers import provider_choices
from playground.registry.models import AgentProfile

ENTER_HINT = "Enter sends · Shift+Enter for a new line"


def offer_runnable_providers(field: forms.ChoiceField) -> None:
    """A provider that cannot start here (Claude without ANTHROPIC_API_KEY) is shown disabled, with the fix."""
    from playground.registry.availability import mark_unavailable, provider_unavailable

    mark_unavailable(field, {key: provider_unavailable(key) for key, _label in field.choices})


def refuse_what_cannot_run(form: forms.Form, profiles: list, provider: str) -> None:
    """Refuse, before a run starts, a provider or profile the run would fail on (a disabled option can still be posted)."""
    from playground.registry.availability import profile_run_problem

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
                              required=False, max_length=20_000)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = provider_choices()
        offer_runnable_providers(self.fields["provider"])

    def clean(self):
        cleaned = super().clean()
        refuse_what_cannot_run(self, [cleaned.get("profile")], cleaned.get("provider") or "")
        return cleaned


class MessageForm(forms.Form):
    text = forms.CharField(max_length=20_000)


class AnswerForm(forms.Form):
    prompt = forms.IntegerField(min_value=1)
    choice = forms.ChoiceField(choices=[("once", "Approve once"), ("always", "Always"), ("deny", "Deny")])


class CompareForm(forms.Form):
    profile_a = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                       empty_label="Default settings", label="Left profile")
    profile_b = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                       empty_label="Default settings", label="Right profile")
    provider = forms.ChoiceField(choices=(), required=False)
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What time is it in Tokyo?", "data-enter-sends": ""}),
                              help_text=ENTER_HINT,
                              max_length=20_000)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = provider_choices()
        offer_runnable_providers(self.fields["provider"])

    def clean(self):
        cleaned = super().clean()
        refuse_what_cannot_run(self, [cleaned.get("profile_a"), cleaned.get("profile_b")], cleaned.get("provider") or "")
        return cleaned
