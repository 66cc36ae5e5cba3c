"""The wire styles' base class: everything vendor-specific about one way a planned turn goes on the wire.

A wire style is a subclass of `WireStyle` in its own module under `playground/engine/wires/`, named
by its dotted path in `wires.registry.WIRE_STYLE_CLASSES`; the registry makes one instance of each.
The engine plans every turn the same way (permissions, deferral, the mode decision, discovered tools:
`requests.build_request`) in one of two planning shapes, `planned_as`:

- "native": discovered tools are recovered from `tool_reference` blocks and sent with
  `defer_loading`; our ToolSearch answers with references (`toolsearch_tool`);
- "client": discovered tools go as ordinary tools; our ToolSearch answers with JSON text.

The style then owns the rest: the request body it sends for the plan (`build_request`), how a
ToolSearch result of ours enters the history (`search_answer`), the history a discovery leaves
(`discovery_messages`), what the model sees of the tools (`wire_tokens`, `sends_announcement`),
whose prompt cache the request goes to (`vendor`, `caches_prompt`, `cache_model`), and its names
and labels on pages, in the command line and in traces.

Every hook is a pure function of its arguments: it reads the turn (a `turn.TurnPlan`, passed in;
this module imports no planner, so a style never knows the turn's module and the other way round)
and returns new data, never changing what it was given.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from playground.engine.openai_wire import wire_tool_names
from playground.engine.prompt_cache import cache_model
from playground.engine.search.base import ToolSearchResult
from playground.engine.tokens import TokenCounter
from playground.engine.tools import TOOL_SEARCH_NAME, Tool
from playground.engine.toolsearch_tool import tool_search_user_blocks

MESSAGES_API = "messages"  # the SDK call a style's body is for: `messages.create` …
RESPONSES_API, CHAT_COMPLETIONS_API = "responses", "chat.completions"  # … `responses.create`, `chat.completions.create`


class WireStyle:
    """One wire style. Subclasses set the class attributes and implement `build_request`; the other
    hooks have defaults that fit a style whose model calls our ToolSearch on the Messages API."""

    # The one name: `AgentSettings.wire`, a profile's stored `wire_style` (for `profile_choice` styles),
    # the `wire` of a saved turn event. Never change it once stored.
    name: ClassVar[str]
    vendor: ClassVar[str]  # whose API and prompt cache: "anthropic" or "openai"
    planned_as: ClassVar[str]  # "native" or "client": how `requests.build_request` plans its turns
    # The profile style this one plays on its vendor's wire (who searches, what answers): an OpenAI
    # model running a "native" profile gets `openai-client`. A profile style stands for itself.
    stands_for: ClassVar[str] = ""
    profile_choice: ClassVar[bool] = False  # a profile may choose it (AgentProfile.wire_style's choices)
    api: ClassVar[str] = MESSAGES_API
    label: ClassVar[str]  # the profile form's choice, and where a page names the style in full
    short_label: ClassVar[str] = ""  # the inspector's and model view's menus ("": `label`)
    compare_label: ClassVar[str] = ""  # compare's "vendor and wire style" menu, after the vendor ("": `label`)
    # The vendor's own search loads tools inside its response (no ToolSearch round trip of ours).
    searches_on_server: ClassVar[bool] = False
    server_search_variants: ClassVar[tuple[str, ...]] = ()  # the server-side search tools it takes (`AgentSettings.server_search`)
    search_call_prefix: ClassVar[str] = "toolu_"  # the id a search call of this wire carries (a made-up history's)
    sends_announcement: ClassVar[bool] = True  # the deferred-tools announcement goes on the wire
    betas: ClassVar[tuple[str, ...]] = ()  # the beta headers its requests need (the body's `betas`: the SDK's beta call)
    # a tool_result naming a tool can load it (load-on-call): False where a function is loaded only
    # through a search's own output (OpenAI's tool_search styles)
    loads_from_tool_result: ClassVar[bool] = True

    # -- names ------------------------------------------------------------------------------------------
    @property
    def command_name(self) -> str:
        """The name `toolsearch request|cost --wire` and compare's menu use: the vendor first."""
        prefix = f"{self.vendor}-"
        return self.name if self.name.startswith(prefix) else prefix + self.name

    @property
    def otel_name(self) -> str:
        """`playground.turn.wire_style` on a trace's chat span: the style's name."""
        return self.name

    def __repr__(self) -> str:
        return f"<wire style {self.name}>"

    # -- loading modes (a task run over every mode, agenteval) --------------------------------------------
    def loading_modes(self) -> tuple[str, ...]:
        """The loading modes this style plays: its name, and one more for each profile setting that
        changes what its model is offered (`loading_mode` tells which a profile runs)."""
        return (self.name,)

    def loading_mode(self, settings: Any) -> str:
        """Which of `loading_modes` a profile's engine settings (`requests.AgentSettings`) run."""
        return self.name

    # -- settings ---------------------------------------------------------------------------------------
    def default_settings(self) -> dict[str, Any]:
        """The AgentSettings fields that run this style where nothing else is said (the command line)."""
        return {"wire": self.name}

    def check_settings(self, server_search: str) -> None:
        """Raise ValueError for settings this style cannot run (`AgentSettings.__post_init__` asks).
        Only the "server" style takes a server-side search variant."""
        if server_search:
            raise ValueError(f"the server-side search tool needs the server wire style, not {self.name}")

    # -- the request ------------------------------------------------------------------------------------
    def build_request(self, turn: Any) -> dict[str, Any]:
        """The request body for the planned turn (`turn.request`, `turn.settings`): the keyword
        arguments of the SDK call `api` names. Pure; may share the plan's lists (callers copy)."""
        raise NotImplementedError

    def tool_changes(self, turn: Any) -> Any:
        """What the harness changes in the history before this turn's request (a system message the
        loop stores, with why), or None: only the "tool-changes" style changes anything."""
        return None

    def keeps_tool_search(self, settings: Any) -> bool:
        """Whether the plan carries ToolSearch and its announcement (`AgentSettings.keeps_tool_search`)."""
        return True

    def announces(self, turn: Any) -> bool:
        """Whether the plan's deferred-tools announcement goes on the wire this turn."""
        return self.sends_announcement

    def offered_tool_names(self, turn: Any, body: dict[str, Any]) -> frozenset[str]:
        """The tool names the model may call in `body`: every tool it carries (with defer_loading or
        not; in an OpenAI namespace, or loaded by a `tool_search_output` in its input)."""
        return frozenset(wire_tool_names(body))

    def wire_tokens(self, turn: Any) -> Any:
        """The turn's `requests.TokenAccounting` for the body as sent: the plan's own by default."""
        return turn.request.tokens

    # -- the history ------------------------------------------------------------------------------------
    def search_answer(self, tool_use_id: str, result: ToolSearchResult) -> list[dict[str, Any]]:
        """The user-message blocks answering one call of our ToolSearch, as the history keeps them
        (the planning shape's: `tool_reference` blocks and "Tool loaded.", or the JSON text)."""
        return tool_search_user_blocks(tool_use_id, result, self.planned_as)

    def discovery_messages(self, call_id: str, arguments: Mapping[str, Any], result: ToolSearchResult, *,
                           definitions: Callable[[str], Tool | None], server_search: str = "") -> list[dict[str, Any]]:
        """The history one search leaves when it loads `result.matches`: by default the model's call
        of our ToolSearch with `arguments` and `search_answer`. A style whose vendor searches answers
        with that vendor's own items (`definitions`: the catalog's tool of a name)."""
        return [{"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": TOOL_SEARCH_NAME,
                                                   "input": dict(arguments)}]},
                {"role": "user", "content": self.search_answer(call_id, result)}]

    # -- the prompt cache -------------------------------------------------------------------------------
    def caches_prompt(self, settings: Any) -> bool:
        """Whether the request is cached: what the profile marks (`settings.prompt_cache`) by default."""
        return bool(settings.prompt_cache)

    def cache_model(self, *, ttl: str, enabled: bool, counter: TokenCounter) -> Any:
        """A fresh `prompt_cache` model of the vendor's cache (feed it the conversation's requests)."""
        return cache_model(self.vendor, ttl=ttl, enabled=enabled, counter=counter)
