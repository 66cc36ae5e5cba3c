from __future__ import annotations

from django import forms

from playground.conversations.providers import provider_choices
from playground.registry.models import AgentProfile

ENTER_HINT = "Enter sends · Shift+Enter for a new line"


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
