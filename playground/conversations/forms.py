from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model

from playground.conversations.models import Conversation, UsageBudget
from playground.conversations.overview import DEFAULT_SPLIT, SPLITS, UsageFilters
from playground.conversations.providers import (
    AUTO,
    provider_choices,
    provider_class,
    provider_key_for,
    provider_label,
    vendor_provider_keys,
)
from playground.conversations.feedback import FEEDBACK_FILTERS
from playground.conversations.feedback import MAX_COMMENT_CHARS as MAX_FEEDBACK_CHARS
from playground.conversations.services import MAX_MESSAGE_CHARS, PERMISSION_CHOICES
from playground.conversations.sharing import expiry_options
from playground.registry import availability
from playground.engine.wires.registry import profile_style_of, wire_styles
from playground.engine.wires.vendors import VENDOR_LABELS
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


class StartsRuns(forms.Form):
    """A form that starts runs: its provider choice offers only what can run here, and it refuses a
    provider or profile (`profile_fields`) the run would fail on."""

    profile_fields: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = provider_choices()
        offer_runnable_providers(self.fields["provider"])

    def clean(self):
        cleaned = super().clean()
        refuse_what_cannot_run(self, [cleaned.get(name) for name in self.profile_fields], cleaned.get("provider") or "")
        return cleaned


class NewConversationForm(StartsRuns):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                     empty_label="Default settings")
    provider = forms.ChoiceField(choices=(), required=False)
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What time is it in Tokyo?", "data-enter-sends": ""}),
                              help_text=ENTER_HINT,
                              required=False, max_length=MAX_MESSAGE_CHARS)
    profile_fields = ("profile",)


class MessageForm(forms.Form):
    text = forms.CharField(max_length=MAX_MESSAGE_CHARS)


class ShareForm(forms.Form):
    """How long a read-only share link works (sharing.expiry_options)."""

    hours = forms.TypedChoiceField(coerce=int, label="Works for")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        options = expiry_options()
        self.fields["hours"].choices = [(o.hours, o.label) for o in options]
        self.fields["hours"].initial = next((o.hours for o in options if o.hours == 24), options[0].hours)


class AnswerForm(forms.Form):
    prompt = forms.IntegerField(min_value=1)
    choice = forms.ChoiceField(choices=list(PERMISSION_CHOICES.items()))


class CompareForm(StartsRuns):
    profile_a = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                       empty_label="Default settings", label="Left profile")
    profile_b = forms.ModelChoiceField(queryset=AgentProfile.objects.filter(is_subagent=False), required=False,
                                       empty_label="Default settings", label="Right profile")
    provider = forms.ChoiceField(choices=(), required=False)
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What time is it in Tokyo?", "data-enter-sends": ""}),
                              help_text=ENTER_HINT,
                              max_length=MAX_MESSAGE_CHARS)
    profile_fields = ("profile_a", "profile_b")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # What a comparison is for: every tool loaded on the left, tool search on the right (the native
        # wire style and the plain flat announcement first: what a model gets without a gateway or
        # tuning), on the automatic provider (a profile pinned to OpenAI compares vendors, not loading).
        # The first such profile by name; a side with no such profile keeps the default settings.
        profiles = sorted(self.fields["profile_a"].queryset,
                          key=lambda p: (bool(p.provider), p.wire_style != AgentProfile.WireStyle.NATIVE,
                                         p.announcement_layout != AgentProfile.Layout.FLAT, p.name))
        self.fields["profile_a"].initial = next((p.pk for p in profiles if p.tool_search_mode == "false"), None)
        self.fields["profile_b"].initial = next((p.pk for p in profiles if p.tool_search_mode == "true"), None)
        add_vendor_wire_fields(self)
        self.order_fields(["profile_a", "wire_a", "profile_b", "wire_b", "provider", "message"])

    def clean(self):
        cleaned = forms.Form.clean(self)  # each side is checked with its own vendor and wire (below)
        provider = cleaned.get("provider") or ""
        sides = [(cleaned.get("profile_a"), cleaned.get("wire_a") or PROFILE_WIRE), (cleaned.get("profile_b"), cleaned.get("wire_b") or PROFILE_WIRE)]
        for problem in dict.fromkeys(side_run_problem(profile, wire, provider) for profile, wire in sides):
            if problem:
                self.add_error(None, problem)
        return cleaned

    def sides(self) -> list[tuple[AgentProfile | None, str, str]]:
        """(profile, provider key, wire style override or "") per side, left then right."""
        provider = self.cleaned_data.get("provider") or ""
        return [(self.cleaned_data.get(f"profile_{side}"), *side_run(self.cleaned_data.get(f"wire_{side}") or PROFILE_WIRE, provider))
                for side in "ab"]


class ConversationFilterForm(forms.Form):
    """The list's GET filters. A bad value (unknown profile id, status, provider or owner) is a field
    error the page shows next to the list, which is then filtered by the values that were valid."""

    q = forms.CharField(required=False, max_length=200, label="Search",
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "Title or message text"}))
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.order_by("name"), required=False, empty_label="any",
                                     error_messages={"invalid_choice": "There is no profile with id %(value)s."})
    provider = forms.ChoiceField(choices=(), required=False,
                                 error_messages={"invalid_choice": "%(value)s is not a known provider."})
    status = forms.ChoiceField(choices=(), required=False,
                               error_messages={"invalid_choice": "%(value)s is not a conversation status."})
    # A task run's conversations (agent evaluation): the run's page links here with its id.
    task_run = forms.IntegerField(required=False, min_value=1, max_value=2**31 - 1, label="Task run",
                                  widget=forms.NumberInput(attrs={"placeholder": "any", "style": "width: 6em"}))

    feedback = forms.ChoiceField(choices=[("", "any"), *[(k, label) for k, (label, _) in FEEDBACK_FILTERS.items()]], required=False,
                                 error_messages={"invalid_choice": "%(value)s is not a feedback filter."})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = [("", "any")] + [(key, provider_label(key)) for key in settings.MODEL_PROVIDERS]
        self.fields["status"].choices = [("", "any"), *Conversation.Status.choices]
        # Everyone watches everyone's conversations, so anyone may narrow them to one person's.
        self.fields["owner"] = forms.ModelChoiceField(
            queryset=get_user_model().objects.filter(conversations__isnull=False).distinct().order_by("username"),
            to_field_name="username", required=False, empty_label="anyone",
            error_messages={"invalid_choice": "No one named %(value)s has conversations."})

    def valid_filters(self) -> dict:
        """The filters whose values were valid (a bad one is dropped, and reported by the form)."""
        self.is_valid()
        return {name: value for name, value in self.cleaned_data.items() if value not in (None, "")}


# -- compare: a vendor and wire style per side (kept apart from the rest of the form for easy merges) --
# A side's wire on the wire, every registered style as `toolsearch request` names it: (its vendor,
# the profile wire style that runs as it on that vendor).
VENDOR_WIRES: dict[str, tuple[str, str]] = {
    style.command_name: (style.vendor, profile_style_of(style.name)) for style in wire_styles()}
VENDOR_WIRE_LABELS: dict[str, str] = {
    style.command_name: f"{VENDOR_LABELS[style.vendor]} · {style.compare_label or style.label}" for style in wire_styles()}
PROFILE_WIRE = ""


def side_run(wire: str, requested_provider: str = "") -> tuple[str, str]:
    """(provider key, profile wire style) for a compare side's wire choice ("" → the form's provider
    and the profile's own style). The vendor's provider when it can run here, else its offline demo
    agent on that vendor's wire; an offline provider chosen for the form keeps the side offline."""
    if wire == PROFILE_WIRE:
        return requested_provider, ""
    vendor, profile_style = VENDOR_WIRES[wire]
    online, offline = vendor_provider_keys(vendor)  # the vendor's provider and its offline demo agent
    if requested_provider and getattr(provider_class(requested_provider), "offline", False):
        return offline, profile_style
    return (offline if availability.provider_unavailable(online) else online), profile_style


def side_run_problem(profile: AgentProfile | None, wire: str, requested_provider: str) -> str:
    """Why a compare side (profile, wire choice, the form's provider) would fail at run time."""
    if wire == PROFILE_WIRE:
        return profile_run_problem(profile, requested_provider)
    key, profile_style = side_run(wire, requested_provider)
    reason = availability.wire_style_unavailable(profile_style, key)
    return f"{VENDOR_WIRE_LABELS[wire]}: {reason}." if reason else profile_run_problem(profile, key)


def add_vendor_wire_fields(form: forms.Form) -> None:
    """Compare's `wire_a` / `wire_b`: a choice the deployment cannot run is disabled with the reason;
    one that runs with the offline demo agent (no key) says so."""
    choices: list[tuple[str, str]] = [(PROFILE_WIRE, "The profile's own (with the provider above)")]
    reasons: dict[str, str] = {}
    for wire, label in VENDOR_WIRE_LABELS.items():
        online, _offline = vendor_provider_keys(VENDOR_WIRES[wire][0])
        key, profile_style = side_run(wire)
        reasons[wire] = availability.wire_style_unavailable(profile_style, key)
        offline = key != online and not reasons[wire]
        choices.append((wire, f"{label} — offline demo agent ({provider_label(online)} has no API key here)" if offline else label))
    help_text = "Claude vs OpenAI on one profile, or OpenAI's hosted search vs our backend: the side runs its profile with this wire style."
    for name, label in (("wire_a", "Left: vendor and wire style"), ("wire_b", "Right: vendor and wire style")):
        form.fields[name] = forms.ChoiceField(choices=choices, required=False, label=label,
                                              help_text=help_text if name == "wire_b" else "")
        availability.mark_unavailable(form.fields[name], reasons)
class OverviewFilterForm(forms.Form):
    """The overview's filters (GET, bookmarkable): a period, what a row is (the split), restrictions to one
    profile, user, provider, model or kind, and the charted figure. The user field is an admin's only:
    who spent what is not every viewer's to read."""

    period = forms.ChoiceField(choices=[("24h", "Last 24 hours (hourly)"), ("7d", "Last 7 days (daily)"),
                                        ("30d", "Last 30 days (daily)"), ("90d", "Last 90 days (weekly)")], required=False)
    split = forms.ChoiceField(label="Per", choices=list(SPLITS.items()), required=False)
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.order_by("name"), required=False, empty_label="All profiles")
    user = forms.ModelChoiceField(queryset=get_user_model().objects.order_by("username"), required=False, empty_label="All users")
    provider = forms.ChoiceField(required=False)
    model = forms.CharField(required=False, max_length=200, widget=forms.TextInput(attrs={"placeholder": "any model", "size": 16}))
    kind = forms.ChoiceField(choices=[("", "Every kind"), *Conversation.Kind.choices], required=False)
    metric = forms.ChoiceField(choices=[("cost", "Dollars"), ("tokens", "Tokens"), ("p95_ms", "Model call p95"),
                                        ("errors", "Errors")], required=False)

    def __init__(self, *args, can_see_users: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = [("", "Every provider"), *[(k, label) for k, label in provider_choices() if k != AUTO]]
        if not can_see_users:
            del self.fields["user"]
            self.fields["split"].choices = [(k, v) for k, v in SPLITS.items() if k != "user"]

    def choices(self) -> tuple[str, str, UsageFilters, str]:
        """(period, split, filters, metric); a bad value falls back to the default instead of failing."""
        data = self.cleaned_data if self.is_valid() else {}
        profile, user = data.get("profile"), data.get("user")
        filters = UsageFilters(profile_id=profile.pk if profile is not None else None,
                               user_id=user.pk if user is not None else None,
                               provider=data.get("provider") or "", model=(data.get("model") or "").strip(), kind=data.get("kind") or "")
        return data.get("period") or "7d", data.get("split") or DEFAULT_SPLIT, filters, data.get("metric") or "cost"


class BudgetForm(forms.ModelForm):
    """An admin's new budget: one user or one profile, dollars or tokens, per day or month."""

    class Meta:
        model = UsageBudget
        fields = ["user", "profile", "metric", "period", "limit"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user"].queryset = get_user_model().objects.filter(is_active=True).order_by("username")
        self.fields["profile"].queryset = AgentProfile.objects.order_by("name")
        self.fields["limit"].min_value = 0

    def clean(self):
        data = super().clean()
        if bool(data.get("user")) == bool(data.get("profile")):
            raise forms.ValidationError("A budget is for one user or one profile: choose exactly one.")
        limit = data.get("limit")
        if limit is not None and limit <= 0:
            self.add_error("limit", "The limit is above zero.")
        return data


class FeedbackForm(forms.Form):
    """Feedback on the conversation (target 0) or one of its turns (the turn_started event's sequence)."""

    target = forms.TypedChoiceField(coerce=int, label="On")
    rating = forms.TypedChoiceField(coerce=int, empty_value=None, required=False, widget=forms.RadioSelect,
                                    choices=[("1", "✓ Good"), ("-1", "✗ Bad"), ("", "No rating")])
    comment = forms.CharField(required=False, max_length=MAX_FEEDBACK_CHARS,
                              widget=forms.Textarea(attrs={"rows": 2, "placeholder": "What went well or wrong (optional)"}))

    def __init__(self, *args, targets: list[tuple[int, int]] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["target"].choices = [("0", "The conversation"), *[(str(seq), f"Turn {n}") for seq, n in targets]]
