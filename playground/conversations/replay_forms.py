"""The "Replay with…" form (the page and `manage.py replay_conversation` both fill it): another profile,
vendor and wire style, search backend, and through which of the origin's messages to re-send."""
from __future__ import annotations

from django import forms

from playground.conversations.forms import PROFILE_WIRE, add_vendor_wire_fields, side_run, side_run_problem
from playground.conversations.models import Conversation
from playground.conversations.providers import provider_choices, provider_label
from playground.conversations.replays import ReplayChoice, person_messages
from playground.registry import availability
from playground.registry.backends import backend_names
from playground.registry.models import AgentProfile

AS_ORIGIN = "=origin"  # the provider choice that keeps the origin's
PROFILE_BACKEND = ""


class ReplayForm(forms.Form):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                     empty_label="Default settings",
                                     error_messages={"invalid_choice": "There is no agent profile %(value)s."})
    provider = forms.ChoiceField(choices=(), required=False, error_messages={"invalid_choice": "%(value)s is not a provider."})
    search_backend = forms.ChoiceField(choices=(), required=False, label="Search backend",
                                       error_messages={"invalid_choice": "%(value)s is not a search backend."})
    through = forms.TypedChoiceField(coerce=int, choices=(), label="Re-send the person's messages",
                                     error_messages={"invalid_choice": "Turn %(value)s is out of range."})

    def __init__(self, *args, origin: Conversation, **kwargs):
        super().__init__(*args, **kwargs)
        self.origin = origin
        self.messages = person_messages(origin)
        self.fields["profile"].initial = origin.profile_id
        kept = provider_label(origin.provider) if origin.provider else "automatic: the profile's provider, else the API key rule"
        self.fields["provider"].choices = [(AS_ORIGIN, f"As the origin ({kept})"), *provider_choices()]
        self.fields["provider"].initial = AS_ORIGIN
        availability.mark_unavailable(self.fields["provider"], {key: availability.provider_unavailable(key)
                                                                for key, _ in provider_choices()})
        backends = backend_names()
        self.fields["search_backend"].choices = [(PROFILE_BACKEND, "The profile's own"), *((name, name) for name in backends)]
        availability.mark_unavailable(self.fields["search_backend"], {name: availability.backend_unavailable(name) for name in backends})
        self.fields["through"].choices = [(n, f"1 through {n}: … “{text[:60]}”" if n > 1 else f"1 only: “{text[:60]}”")
                                          for n, text in enumerate(self.messages, 1)]
        self.fields["through"].initial = len(self.messages)
        add_vendor_wire_fields(self)
        self.fields["wire"] = self.fields.pop("wire_a")
        self.fields["wire"].label = "Vendor and wire style"
        self.fields["wire"].help_text = "The profile's own, or another vendor's wire (its offline demo agent where it has no key)."
        del self.fields["wire_b"]
        self.order_fields(["profile", "provider", "wire", "search_backend", "through"])

    def clean_through(self):
        through = self.cleaned_data["through"]
        if not 1 <= through <= len(self.messages):  # a choice list is never empty here, but be plain about it
            raise forms.ValidationError(f"Turn {through} is out of range (1–{len(self.messages)}).")
        return through

    def clean(self):
        cleaned = super().clean()
        if not self.messages:
            raise forms.ValidationError(f"Conversation #{self.origin.pk} has no message of the person's to re-send.")
        requested = self.origin.provider if cleaned.get("provider") in (AS_ORIGIN, None) else cleaned["provider"]
        problem = side_run_problem(cleaned.get("profile"), cleaned.get("wire") or PROFILE_WIRE, requested)
        if problem:
            self.add_error(None, problem)
        backend = cleaned.get("search_backend") or ""
        if backend and availability.backend_unavailable(backend):
            self.add_error("search_backend", f"The search backend {backend!r} {availability.backend_unavailable(backend)}.")
        return cleaned

    def choice(self) -> ReplayChoice:
        data = self.cleaned_data
        keep = data.get("provider") in (AS_ORIGIN, None)
        key, wire_style = side_run(data.get("wire") or PROFILE_WIRE, self.origin.provider if keep else data["provider"])
        return ReplayChoice(profile=data.get("profile"), provider=None if keep and not wire_style else key,
                            wire_style=wire_style, search_backend=data.get("search_backend") or "", through=data["through"])
