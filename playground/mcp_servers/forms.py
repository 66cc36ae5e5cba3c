"""Forms: the server editor (secrets masked when shown again) and the schema-driven tool-call form."""
from __future__ import annotations

import json
from typing import Any

from django import forms

from playground.engine import safe_json
from playground.mcp_servers.oauth import forget_grant
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.protocol_eras import DEFAULT_PROTOCOL_ERA
# SECRET_MASK is shown instead of every env and header value. Submitting it unchanged keeps the
# stored value, unless the command, arguments, URL or transport it was stored for changed.
from playground.mcp_servers.secrets import SECRET_MASK


def parse_pairs(text: str, separator: str, what: str) -> dict[str, str]:
    """`NAME=value` (environment) or `Name: value` (headers) lines; the server form's and the scratch form's one reading."""
    pairs: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(separator)
        key = key.strip()
        if not sep or not key:
            raise forms.ValidationError(f"line {number}: expected {what} as NAME{separator}value, got {line!r}")
        if any(c.isspace() for c in key):
            raise forms.ValidationError(f"line {number}: the name {key!r} contains spaces")
        pairs[key] = value.strip() if separator == ":" else value
    return pairs


def _format_pairs(values: dict[str, str], separator: str, *, masked: bool) -> str:
    joiner = ": " if separator == ":" else "="
    return "\n".join(f"{k}{joiner}{SECRET_MASK if masked else v}" for k, v in values.items())


def _unmask(submitted: dict[str, str], stored: dict[str, str], what: str, kept: list[str] | None = None) -> dict[str, str]:
    """The submitted pairs with each mask replaced by the stored value; `kept` collects those keys."""
    result: dict[str, str] = {}
    for key, value in submitted.items():
        if value == SECRET_MASK:
            if key not in stored:
                raise forms.ValidationError(f"{what} {key!r}: enter a value (the mask {SECRET_MASK} only keeps a stored one)")
            result[key] = stored[key]
            if kept is not None:
                kept.append(key)
        else:
            result[key] = value
    return result


class McpServerForm(forms.ModelForm):
    url = forms.URLField(
        required=False, max_length=500, assume_scheme="http",
        help_text="Streamable HTTP: the endpoint, e.g. http://127.0.0.1:8765/mcp. SSE (deprecated, for servers "
                  "older than MCP 2025-03-26): the event stream's URL, e.g. http://127.0.0.1:8765/sse",
    )
    args_text = forms.CharField(
        label="Arguments", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One argument per line.",
    )
    env_text = forms.CharField(
        label="Environment", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text=f"KEY=value per line. Stored values are shown as {SECRET_MASK}; leave the mask to keep a value.",
    )
    headers_text = forms.CharField(
        label="HTTP headers", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text=f"Name: value per line. Stored values are shown as {SECRET_MASK}; leave the mask to keep a value.",
    )

    class Meta:
        model = McpServer
        fields = ["name", "transport", "command", "url", "protocol_era", "enabled", "always_load"]
        help_texts = {
            "command": "stdio: the executable to start, e.g. a path to python or npx.",
            "protocol_era": "Which MCP protocol to speak: auto asks server/discover first (2026-07-28) and falls "
                            "back to the initialize handshake; legacy always uses the handshake; a version "
                            "speaks only that stateless version.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["protocol_era"].required = False
        instance = self.instance
        if not self.is_bound:
            self.initial["args_text"] = "\n".join(instance.args or [])
            self.initial["env_text"] = _format_pairs(instance.env or {}, "=", masked=bool(instance.pk))
            self.initial["headers_text"] = _format_pairs(instance.headers or {}, ":", masked=bool(instance.pk))

    def clean_protocol_era(self) -> str:
        # Left out (a script posting the older form): the server keeps its era, a new one gets the default.
        return self.cleaned_data.get("protocol_era") or self.instance.protocol_era or DEFAULT_PROTOCOL_ERA

    def clean_args_text(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["args_text"].splitlines() if line.strip()]

    def clean_env_text(self) -> dict[str, str]:
        submitted = parse_pairs(self.cleaned_data["env_text"], "=", "environment variables")
        self.kept_env: list[str] = []
        return _unmask(submitted, self.instance.env or {}, "environment variable", self.kept_env)

    def clean_headers_text(self) -> dict[str, str]:
        submitted = parse_pairs(self.cleaned_data["headers_text"], ":", "headers")
        self.kept_headers: list[str] = []
        return _unmask(submitted, self.instance.headers or {}, "header", self.kept_headers)

    def _refuse_kept_secrets(self, data: dict[str, Any]) -> None:
        """A stored secret was entered for one program at one place: it follows it only while the
        command, the arguments, the URL and the transport all stay as they were. A change to any
        of them is another program (an interpreter given new arguments runs other code) or another
        destination, which would get it on the next "Test connection": it must be typed again."""
        stored = self.instance
        if not stored.pk:
            return
        changed = [label for label, now, before in (
            ("transport", data.get("transport"), stored.transport),
            ("command", data.get("command") or "", stored.command or ""),
            ("arguments", list(data.get("args_text") or []), list(stored.args or [])),
            ("URL", data.get("url") or "", stored.url or ""),
        ) if now != before]
        if not changed:
            return
        what = " and ".join(changed) if len(changed) <= 2 else ", ".join(changed[:-1]) + " and " + changed[-1]
        for field, kept in (("headers_text", getattr(self, "kept_headers", [])), ("env_text", getattr(self, "kept_env", []))):
            if kept and field not in self.errors:
                self.add_error(field, f"The {what} changed: enter the value of {', '.join(kept)} again (a stored "
                                      f"value is not given to another program or destination; {SECRET_MASK} keeps "
                                      "it only while the command, arguments, URL and transport all stay).")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        self._refuse_kept_secrets(data)
        transport = data.get("transport")
        if transport == McpServer.Transport.STDIO and not data.get("command"):
            self.add_error("command", "A stdio server needs a command to start.")
        if transport in (McpServer.Transport.HTTP, McpServer.Transport.SSE) and not data.get("url"):
            self.add_error("url", f"A{'n' if transport == McpServer.Transport.SSE else ''} {McpServer.Transport(transport).label} server needs a URL.")
        return data

    def save(self, commit: bool = True) -> McpServer:
        server = super().save(commit=False)
        server.args = self.cleaned_data["args_text"]
        server.env = self.cleaned_data["env_text"]
        server.headers = self.cleaned_data["headers_text"]
        if commit:
            server.save()
            if {"url", "transport"} & set(self.changed_data):
                forget_grant(server.pk)  # its tokens were issued for the old address: never sent to a new one
        return server


# --- the "call this tool" form, generated from the tool's input schema ----------------------------

ARG_PREFIX = "arg__"


class ToolCallForm(forms.Form):
    """One field per schema property (string / number / integer / boolean / enum; arrays, objects and
    anything else as JSON), plus a raw-JSON fallback used when `mode` is "raw"."""

    # Required fields carry `required`, so the browser flags an empty one before Call; choosing
    # "Raw JSON" turns the form's validation off (the fields stay empty then: _tool_call_form.html).
    # `clean` still checks required fields in "form" mode and reports them.

    mode = forms.ChoiceField(
        choices=[("form", "Form fields"), ("raw", "Raw JSON")], initial="form", widget=forms.RadioSelect, label="Arguments from"
    )
    raw_arguments = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 6, "class": "mono"}), label="Arguments (JSON object)"
    )
    timeout = forms.FloatField(min_value=0.1, max_value=300, initial=30, label="Timeout (s)")

    def __init__(self, schema: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schema = schema if isinstance(schema, dict) else {}
        properties = self.schema.get("properties") or {}
        required = set(self.schema.get("required") or [])
        self.property_names: list[str] = []
        for name, spec in properties.items():
            if not isinstance(spec, dict):
                spec = {}
            self.fields[ARG_PREFIX + name] = self._field_for(name, spec, name in required)
            self.property_names.append(name)
        if not self.is_bound:
            self.initial["raw_arguments"] = json.dumps(self._example(properties), indent=2)

    def _field_for(self, name: str, spec: dict[str, Any], required: bool) -> forms.Field:
        kind = spec.get("type")
        shown_type = "one of the listed values" if "enum" in spec else (kind if isinstance(kind, str) else "JSON value")
        label = f"{name} ({'required' if required else 'optional'}, {shown_type})"
        help_text = spec.get("description", "")
        common = {"label": label, "help_text": help_text, "required": required}
        if "enum" in spec and isinstance(spec["enum"], list):
            choices = [("", "—")] if not required else []
            choices += [(json.dumps(v), str(v)) for v in spec["enum"]]
            field: forms.Field = forms.ChoiceField(choices=choices, **common)
            field.json_encoded = True  # type: ignore[attr-defined]
            return field
        if kind == "string":
            return forms.CharField(initial=spec.get("default"), strip=False, **common)
        if kind == "integer":
            return forms.IntegerField(initial=spec.get("default"), min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common)
        if kind == "number":
            return forms.FloatField(initial=spec.get("default"), min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common)
        if kind == "boolean":
            choices = ([] if required else [("", "—")]) + [("true", "true"), ("false", "false")]
            default = spec.get("default")
            return forms.ChoiceField(choices=choices, initial="" if default is None else str(default).lower(), **common)
        what = "array" if kind == "array" else "JSON value"
        field = forms.CharField(
            widget=forms.Textarea(attrs={"rows": 2, "class": "mono"}), initial=json.dumps(spec["default"]) if "default" in spec else None,
            **{**common, "help_text": f"{help_text} ({what}, as JSON)".strip()},
        )
        field.json_value = kind or True  # type: ignore[attr-defined]
        return field

    @staticmethod
    def _example(properties: dict[str, Any]) -> dict[str, Any]:
        examples = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}
        return {name: (spec.get("default") if isinstance(spec, dict) and "default" in spec else
                       examples.get(spec.get("type") if isinstance(spec, dict) else None))
                for name, spec in properties.items()}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("mode") == "raw":
            # The raw fallback ignores the generated fields (their errors do not apply).
            for name in self.property_names:
                self.errors.pop(ARG_PREFIX + name, None)
            text = (data.get("raw_arguments") or "").strip() or "{}"
            try:
                arguments = safe_json.loads(text)
            except json.JSONDecodeError as exc:
                raise forms.ValidationError(f"raw arguments are not valid JSON: {exc}") from None
            if not isinstance(arguments, dict):
                raise forms.ValidationError("raw arguments must be a JSON object")
            data["arguments"] = arguments
            return data
        arguments: dict[str, Any] = {}
        for name in self.property_names:
            key = ARG_PREFIX + name
            field = self.fields[key]
            value = data.get(key)
            if value in (None, "") and not field.required:
                continue
            if getattr(field, "json_encoded", False):
                value = json.loads(value)
            elif getattr(field, "json_value", None):
                try:
                    value = safe_json.loads(value)
                except json.JSONDecodeError as exc:
                    self.add_error(key, f"not valid JSON: {exc}")
                    continue
                if field.json_value == "array" and not isinstance(value, list):
                    self.add_error(key, "must be a JSON array, e.g. [1, 2]")
                    continue
                if field.json_value == "object" and not isinstance(value, dict):
                    self.add_error(key, "must be a JSON object")
                    continue
            elif isinstance(field, forms.ChoiceField) and value in ("true", "false"):
                value = value == "true"
            arguments[name] = value
        data["arguments"] = arguments
        return data


class PromptArgumentsForm(forms.Form):
    """A prompt's declared arguments (MCP prompt arguments are strings) as one text field each."""

    PREFIX = "parg__"

    def __init__(self, arguments: list[dict[str, Any]], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for argument in arguments or []:
            name = str(argument.get("name") or "")
            if not name:
                continue
            required = bool(argument.get("required"))
            # MCP prompt arguments are strings: the label says so, and whether it may be left out.
            self.fields[self.PREFIX + name] = forms.CharField(
                label=f"{name} ({'required' if required else 'optional'}, text)", required=required, max_length=10_000,
                help_text=str(argument.get("description") or ""), widget=forms.TextInput(attrs={"placeholder": "text"}),
            )

    def arguments(self) -> dict[str, str]:
        """The filled-in arguments by name (empty optional ones left out)."""
        return {key.removeprefix(self.PREFIX): value for key, value in self.cleaned_data.items() if value not in ("", None)}


class RootsForm(forms.Form):
    """A server's roots for the workbench's session: one `file://` URI per line, a name after a space."""

    MAX_ROOTS = 50

    roots_text = forms.CharField(
        label="Roots", required=False, widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}), max_length=20_000,
        help_text="One per line: a file:// URI, then optionally a space and a name (file:///srv/project Project).",
    )

    @staticmethod
    def text_of(roots: list[dict[str, str]]) -> str:
        return "\n".join(f"{root['uri']} {root['name']}".strip() if root.get("name") else root["uri"] for root in roots or [])

    def clean_roots_text(self) -> list[dict[str, str]]:
        roots: list[dict[str, str]] = []
        for number, raw in enumerate(self.cleaned_data["roots_text"].splitlines(), start=1):
            line = raw.strip()
            if not line:
                continue
            uri, _, name = line.partition(" ")
            if not uri.startswith("file:///") or len(uri) > 1000:
                raise forms.ValidationError(
                    f"line {number}: a root is a file:// URI of an absolute path (MCP roots are file:// URIs), got {uri[:80]!r}")
            if any(root["uri"] == uri for root in roots):
                raise forms.ValidationError(f"line {number}: {uri} is listed twice")
            roots.append({"uri": uri, "name": name.strip()[:200]} if name.strip() else {"uri": uri})
        if len(roots) > self.MAX_ROOTS:
            raise forms.ValidationError(f"at most {self.MAX_ROOTS} roots")
        return roots


class ElicitationForm(forms.Form):
    """A server's `elicitation/create` form, built from its requested schema (flat, primitive
    properties: string — with email, uri, date and date-time formats —, number, integer, boolean,
    single-choice enums as `enum` or `oneOf`, and multi-choice arrays of enums). `content()` is the
    answer as the schema's JSON types."""

    PREFIX = "el__"

    def __init__(self, schema: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        schema = schema if isinstance(schema, dict) else {}
        required = set(schema.get("required") or [])
        self.kinds: dict[str, str] = {}
        for name, spec in (schema.get("properties") or {}).items():
            if isinstance(spec, dict):
                self.fields[self.PREFIX + name] = self._field_for(name, spec, name in required)

    def _field_for(self, name: str, spec: dict[str, Any], required: bool) -> forms.Field:
        label = str(spec.get("title") or name) + ("" if required else " (optional)")
        common: dict[str, Any] = {"label": label, "required": required, "help_text": str(spec.get("description") or "")}
        if "default" in spec:
            common["initial"] = spec["default"]
        kind = spec.get("type")
        choices = self._choices(spec)
        if kind == "array":
            self.kinds[name] = "multi"
            return forms.MultipleChoiceField(choices=self._choices(spec.get("items") or {}), widget=forms.CheckboxSelectMultiple, **common)
        if choices:
            self.kinds[name] = "choice"
            return forms.ChoiceField(choices=([] if required else [("", "—")]) + choices, **common)
        if kind == "boolean":
            self.kinds[name] = "boolean"
            return forms.BooleanField(**{**common, "required": False})  # unchecked is false, an answer too
        if kind in ("integer", "number"):
            self.kinds[name] = kind
            field_class = forms.IntegerField if kind == "integer" else forms.FloatField
            return field_class(min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common)
        self.kinds[name] = "string"
        bounds = {"min_length": spec.get("minLength"), "max_length": spec.get("maxLength") or 10_000}
        form_kind = spec.get("format")
        if form_kind == "email":
            return forms.EmailField(**bounds, **common)
        if form_kind == "uri":
            return forms.URLField(assume_scheme="https", **bounds, **common)
        if form_kind == "date":
            self.kinds[name] = "date"
            return forms.DateField(widget=forms.DateInput(attrs={"type": "date"}), **common)
        if form_kind == "date-time":
            self.kinds[name] = "date-time"
            return forms.DateTimeField(widget=forms.DateTimeInput(attrs={"type": "datetime-local"}), **common)
        return forms.CharField(**bounds, **common)

    @staticmethod
    def _choices(spec: dict[str, Any]) -> list[tuple[str, str]]:
        if isinstance(spec.get("enum"), list):
            names = spec.get("enumNames") if isinstance(spec.get("enumNames"), list) else []
            return [(str(value), str(names[i]) if i < len(names) else str(value)) for i, value in enumerate(spec["enum"])]
        options = spec.get("oneOf") or spec.get("anyOf")
        if isinstance(options, list):
            return [(str(o.get("const")), str(o.get("title") or o.get("const"))) for o in options if isinstance(o, dict) and "const" in o]
        return []

    def content(self) -> dict[str, Any]:
        """The accepted answer by property name (empty optional ones left out)."""
        answer: dict[str, Any] = {}
        for key, value in self.cleaned_data.items():
            name = key.removeprefix(self.PREFIX)
            kind = self.kinds.get(name)
            if value in (None, "", []) and kind != "boolean":
                continue
            if kind in ("date", "date-time"):
                value = value.isoformat()
            answer[name] = value
        return answer
