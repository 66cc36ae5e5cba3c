"""Forms of the registry pages. Definitions are validated by the engine (the rules live there)."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django import forms
from django.conf import settings
from jsonschema import SchemaError
from jsonschema.validators import validator_for

from playground.engine.announcements import MIN_BUDGET_TOKENS
from playground.engine.claude_settings import MAX_SETTINGS_BYTES
from playground.engine.modes import parse_mode
from playground.engine.safe_json import LimitedJSONDecoder
from playground.engine.permissions import validate_pattern
from playground.engine.tools import TOOL_SEARCH_NAME, ToolDefinitionError, validate_input_schema, validate_tool_name
from playground.engine.wires.registry import profile_styles
from playground.registry import adapter, availability, backends, inspector_options, ports
from playground.registry.models import AgentProfile, PermissionRule, Tool

MAX_IMPORT_BYTES = 20 * 1024 * 1024


@contextmanager
def engine_check() -> Iterator[None]:
    """An engine check that refuses a value (ValueError, ToolDefinitionError) becomes the field's
    error, in the engine's own words."""
    try:
        yield
    except ValueError as exc:
        raise forms.ValidationError(str(exc)) from exc


class PrettyJSONField(forms.JSONField):
    """A JSON textarea that shows stored values indented."""

    widget = forms.Textarea(attrs={"rows": 14, "spellcheck": "false"})

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except forms.ValidationError:
            # Django says only "Enter a valid JSON."; say where, and which limit (LimitedJSONDecoder).
            try:
                json.loads(value, cls=self.decoder)
            except json.JSONDecodeError as exc:
                raise forms.ValidationError(f"Enter valid JSON: {exc}", code="invalid") from None
            raise


class ToolForm(forms.ModelForm):
    input_schema = PrettyJSONField(
        decoder=LimitedJSONDecoder,
        initial={"type": "object", "properties": {}},
        help_text='A JSON Schema object schema: {"type": "object", "properties": {...}}.',
    )

    class Meta:
        model = Tool
        fields = [
            "name", "description", "input_schema", "search_hint", "server", "server_name",
            "should_defer", "always_load", "enabled", "source",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 4})}

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if name == TOOL_SEARCH_NAME:
            raise forms.ValidationError(f"{TOOL_SEARCH_NAME} is provided by the engine and cannot be registered.")
        with engine_check():
            validate_tool_name(name)
        return name

    def clean_input_schema(self) -> dict:
        schema = self.cleaned_data["input_schema"]
        with engine_check():
            validate_input_schema(schema, tool_name=self.data.get("name") or "?")
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            raise forms.ValidationError(f"not a valid JSON Schema: {exc.message}") from exc
        return schema

    def clean(self) -> dict:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        candidate = Tool(
            name=cleaned.get("name", ""),
            description=cleaned.get("description", ""),
            input_schema=cleaned.get("input_schema"),
            search_hint=cleaned.get("search_hint", ""),
            server=cleaned.get("server"),
            server_name=cleaned.get("server_name", ""),
            should_defer=cleaned.get("should_defer", False),
            always_load=cleaned.get("always_load", False),
        )
        try:
            adapter.tool_to_engine(candidate)  # anything else the engine would refuse
        except ToolDefinitionError as exc:
            self.add_error(None, str(exc))
        return cleaned


class BulkToolActionForm(forms.Form):
    ACTIONS = [
        ("enable", "Enable"),
        ("disable", "Disable"),
        ("defer", "Defer (should_defer on)"),
        ("undefer", "Do not defer"),
        ("always_load", "Always load"),
        ("no_always_load", "Not always loaded"),
    ]
    action = forms.ChoiceField(choices=ACTIONS)
    ids = forms.ModelMultipleChoiceField(queryset=Tool.objects.all(), error_messages={"required": "Select at least one tool."})


class ImportForm(forms.Form):
    file = forms.FileField(required=False, help_text="JSONL, Anthropic tools array, OpenAI functions/tools, MCP tools/list result.")
    text = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}), label="…or paste",
        help_text="Pasted text is limited to 2.5 MB (Django's request size limit); upload larger catalogs as a file.",
    )
    server_name = forms.CharField(
        required=False, max_length=40,
        help_text="MCP tools/list results carry bare tool names: the server key makes them mcp__<server>__<tool>.",
    )

    def clean(self) -> dict:
        cleaned = super().clean()
        upload = cleaned.get("file")
        text = cleaned.get("text") or ""
        if upload is not None:
            if upload.size > MAX_IMPORT_BYTES:
                raise forms.ValidationError(f"The file is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MB.")
            try:
                text = upload.read().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise forms.ValidationError(f"The file is not UTF-8 text: {exc}") from exc
            cleaned["filename"] = upload.name
        else:
            cleaned["filename"] = ""
        if not text.strip():
            raise forms.ValidationError("Upload a file or paste a catalog.")
        cleaned["payload"] = text
        server = (cleaned.get("server_name") or "").strip()
        if server and not re.fullmatch(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*", server):
            self.add_error("server_name", "Letters, digits, '-' and single '_' only.")
        elif not server and is_mcp_tools_list(text):
            # Its names are bare: without a server they would quietly become mcp__imported__<tool>.
            self.add_error("server_name", "This is an MCP tools/list result: its tool names are bare, so name the server "
                                          "they come from (they become mcp__<server>__<tool>).")
        return cleaned


def is_mcp_tools_list(text: str) -> bool:
    """Whether `text` is an MCP tools/list result (bare or in its JSON-RPC response): tools with `inputSchema`."""
    try:
        document = json.loads(text, cls=LimitedJSONDecoder)
    except ValueError:
        return False  # not one JSON document (JSONL, or broken): the import's own errors say what is wrong
    if isinstance(document, dict) and isinstance(document.get("result"), dict):
        document = document["result"]
    tools = document.get("tools") if isinstance(document, dict) else None
    return isinstance(tools, list) and any(isinstance(t, dict) and "inputSchema" in t for t in tools)


class PermissionRuleForm(forms.ModelForm):
    class Meta:
        model = PermissionRule
        fields = ["effect", "pattern", "profile", "note"]
        widgets = {
            "pattern": forms.TextInput(attrs={"placeholder": "Tool name, mcp__server or mcp__server__*", "aria-label": "Pattern"}),
            "note": forms.TextInput(attrs={"placeholder": "Note (why)", "aria-label": "Note"}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["effect"].choices = PermissionRule.Effect.choices  # no empty choice
        if self.instance.pk is None:
            self.initial.setdefault("effect", PermissionRule.Effect.DENY)  # what editors add most
        self.fields["effect"].widget.attrs["aria-label"] = "Effect"
        self.fields["profile"].empty_label = "global"
        self.fields["profile"].widget.attrs["aria-label"] = "Scope"

    def clean_pattern(self) -> str:
        pattern = self.cleaned_data["pattern"].strip()
        with engine_check():
            validate_pattern(pattern)
        return pattern

    def clean(self) -> dict[str, Any]:
        # A second identical rule changes nothing but shows twice in the table and the tester's trace.
        cleaned = super().clean()
        effect, pattern, profile = cleaned.get("effect"), cleaned.get("pattern"), cleaned.get("profile")
        if effect and pattern:
            same = PermissionRule.objects.filter(effect=effect, pattern=pattern, profile=profile).exclude(pk=self.instance.pk)
            if same.exists():
                scope = f"profile {profile.name}" if profile else "global"
                raise forms.ValidationError(f"This rule already exists: {effect} {pattern} ({scope}).", code="duplicate")
        return cleaned


# Tools every conversation has without a registry row: ToolSearch, and the conversations app's `Agent`
# (conversations/subagents.py AGENT_TOOL_NAME; named here, as the registry does not import that app).
LOOP_TOOL_NAMES = frozenset({TOOL_SEARCH_NAME, "Agent"})


class PermissionTestForm(forms.Form):
    tool = forms.CharField(max_length=64, widget=forms.TextInput(attrs={"placeholder": "mcp__github__create_issue"}))
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.all(), required=False, empty_label="(global rules only)")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Shown on the page with the rule form, which has its own `profile`: distinct ids for the labels.
        kwargs.setdefault("auto_id", "id_test_%s")
        super().__init__(*args, **kwargs)

    def clean_tool(self) -> str:
        # A typo was answered "allow: no rule names it", as if that tool existed and were safe.
        name = self.cleaned_data["tool"].strip()
        if name not in LOOP_TOOL_NAMES and not Tool.objects.filter(name=name).exists():
            raise forms.ValidationError(f"No tool named {name!r} in the registry: check the spelling (names are case-sensitive).",
                                        code="unknown_tool")
        return name


class ToolNameListField(forms.CharField):
    """Tool names or patterns, one per line or comma-separated; stored as a JSON list."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return "\n".join(value)
        return value or ""

    def to_python(self, value: Any) -> list[str]:
        text = super().to_python(value) or ""
        names: list[str] = []
        for part in re.split(r"[,\n]", text):
            part = part.strip()
            if part and part not in names:
                names.append(part)
        return names


class AgentProfileForm(forms.ModelForm):
    allowed_tools = ToolNameListField(required=False, help_text="Empty: every tool. One name or pattern per line.")
    disallowed_tools = ToolNameListField(required=False)
    search_backend = forms.ChoiceField(required=False)
    backend_settings = forms.CharField(
        required=False, label="Backend settings", max_length=inspector_options.INSPECTOR_SETTINGS_MAX_CHARS,
        help_text="Optional, as in the inspector: key=value joined by “:”, e.g. aspect_weight=0 for hybrid.",
    )
    provider = forms.ChoiceField(required=False)

    class Meta:
        model = AgentProfile
        fields = [
            "name", "system_prompt", "model", "provider", "tool_search_mode", "wire_style", "search_backend",
            "backend_settings", "max_results", "announcement_style", "announcement_layout", "announcement_budget", "prompt_cache", "prompt_cache_ttl", "allowed_tools", "disallowed_tools", "is_subagent",
        ]
        widgets = {"system_prompt": forms.Textarea(attrs={"rows": 4})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["search_backend"].choices = [("", f"default ({settings.TOOLSEARCH_DEFAULT_BACKEND})")] + [
            (name, name) for name in backends.backend_names()
        ]
        self.fields["provider"].choices = ports.providers().provider_choices()
        # A stored spec shows as its backend and its settings.
        name, _, tuned = (self.instance.search_backend or "").partition(":")
        if tuned:
            self.initial["search_backend"], self.initial["backend_settings"] = name, tuned
        self._name_what_cannot_run_here()

    def _name_what_cannot_run_here(self) -> None:
        """Choices that cannot work in this deployment carry the reason and the fix in their label.
        They stay selectable: a profile also feeds "what the model sees" and may be meant for a
        deployment with the key; the conversation and evaluation forms refuse what cannot run."""
        unavailable = {
            "provider": {key: availability.provider_unavailable(key) for key, _ in self.fields["provider"].choices},
            "wire_style": {style.name: availability.server_style_unavailable() for style in profile_styles()
                           if style.server_search_variants},
            "search_backend": {name: availability.backend_unavailable(name) for name, _ in self.fields["search_backend"].choices if name},
        }
        for field, reasons in unavailable.items():
            availability.mark_unavailable(self.fields[field], reasons, keep=tuple(reasons))

    def clean_backend_settings(self) -> str:
        """Checked as the inspector checks them, and the backend made once: a bad value is an
        error here, not a conversation that cannot search. The stored `search_backend` becomes
        the whole spec (`hybrid:aspect_weight=0`)."""
        text = self.cleaned_data.get("backend_settings", "").strip()
        name = self.cleaned_data.get("search_backend") or ""
        if not text:
            return ""
        if not name:
            raise forms.ValidationError("Choose a backend for these settings.")
        with engine_check():
            self.cleaned_data["search_backend"] = inspector_options.checked_backend_spec(name, text)
        return text


    def clean_announcement_budget(self) -> int:
        budget = self.cleaned_data["announcement_budget"]
        if budget and budget < MIN_BUDGET_TOKENS:
            raise forms.ValidationError(f"Use 0 (2 % of the context window) or at least {MIN_BUDGET_TOKENS} tokens.")
        return budget

    def clean_tool_search_mode(self) -> str:
        mode = self.cleaned_data["tool_search_mode"].strip()
        if mode:
            with engine_check():
                parse_mode(mode)
        return mode

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        wire_style, provider = cleaned.get("wire_style"), cleaned.get("provider")
        if wire_style and provider and wire_style not in ports.providers().provider_class(provider).wire_styles:
            self.add_error("wire_style", f"The {ports.providers().provider_class(provider).label} cannot run the {wire_style!r} wire style: "
                                         "choose another wire style or another provider.")
        return cleaned

    def clean_max_results(self) -> int:
        value = self.cleaned_data["max_results"]
        if not 1 <= value <= 50:
            raise forms.ValidationError("Between 1 and 50.")
        return value

    def clean_allowed_tools(self) -> list[str]:
        return self._patterns("allowed_tools")

    def clean_disallowed_tools(self) -> list[str]:
        return self._patterns("disallowed_tools")

    def _patterns(self, field: str) -> list[str]:
        names = self.cleaned_data[field]
        for name in names:
            try:
                validate_pattern(name)
            except ValueError as exc:
                raise forms.ValidationError(f"{name!r}: {exc}") from exc
        return names


class SettingsImportForm(forms.Form):
    """Claude Code's `.claude/settings.json` (pasted or uploaded) and the scope its rules go to."""

    settings_file = forms.FileField(required=False, label="Settings file", help_text=".claude/settings.json or settings.local.json")
    settings_text = forms.CharField(required=False, label="…or paste it", widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}))
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.all(), required=False, empty_label="global (every profile)")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        upload = data.get("settings_file")
        if upload is not None:
            if upload.size > MAX_SETTINGS_BYTES:
                raise forms.ValidationError(f"The file is over {MAX_SETTINGS_BYTES // 1000} KB: not a settings file.")
            try:
                data["text"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        else:
            data["text"] = data.get("settings_text") or ""
        if not data["text"].strip():
            raise forms.ValidationError("Choose a settings file or paste one.")
        return data
