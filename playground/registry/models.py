from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from playground.engine import permissions as engine_permissions
from playground.engine.wires.registry import profile_styles
from playground.registry import tool_fields
from playground.storage_fields import StorableCharField, StorableJSONField, StorableTextField


# What `refresh_derived_fields` sets: every write of a definition writes these too.
DERIVED_FIELDS = ("token_estimate", "deferred", "content_hash")


# The built-in tools this deployment runs (the mcp_servers app registers its implementations at
# start-up: the registry, below it, does not import it). A built-in definition not in it (Claude
# Code's `Read`, `Write`, …, shipped so the model sees them) is answered with a simulated result.
_RUNNABLE_BUILTINS: set[str] = set()


def register_runnable_builtins(names) -> None:
    _RUNNABLE_BUILTINS.update(names)


class Tool(models.Model):
    """A tool row; `playground.registry.adapter` turns rows into engine `Tool`s."""

    class Source(models.TextChoices):
        BUILTIN = "builtin", "Built-in"
        MANUAL = "manual", "Manual"
        IMPORTED = "imported", "Imported"
        MCP = "mcp", "MCP"

    name = StorableCharField(max_length=64, unique=True)
    description = StorableTextField(blank=True)
    input_schema = StorableJSONField(default=dict)
    search_hint = StorableCharField(max_length=300, blank=True)
    server = models.ForeignKey(
        "mcp_servers.McpServer", null=True, blank=True, on_delete=models.CASCADE, related_name="tools"
    )
    # Server name for MCP tools whose server is not registered (imported catalogs).
    server_name = StorableCharField(max_length=64, blank=True, db_index=True)
    should_defer = models.BooleanField(default=False)
    always_load = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True, db_index=True)
    source = StorableCharField(max_length=10, choices=Source.choices, default=Source.MANUAL)
    token_estimate = models.PositiveIntegerField(default=0)
    # Denormalised from the engine's `is_deferred` rule on every save, so lists can filter in SQL
    # without restating the rule here.
    deferred = models.BooleanField(default=False, db_index=True)
    # The engine's `Tool.content_hash` of the definition, kept with the fields above, so that reading
    # the catalog back does not hash every tool again for its fingerprint ("": computed when read).
    content_hash = StorableCharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def simulated_builtin(self) -> bool:
        """A built-in definition this playground has no implementation of: its calls are simulated."""
        return self.source == self.Source.BUILTIN and self.name not in _RUNNABLE_BUILTINS

    @property
    def source_label(self) -> str:
        return "Built-in · simulated" if self.simulated_builtin else self.get_source_display()

    @property
    def is_mcp(self) -> bool:
        return self.name.startswith("mcp__")

    @property
    def server_label(self) -> str:
        """The MCP server this tool belongs to: the registered server, else the imported name."""
        if self.server_id:
            return self.server.name
        return self.server_name

    def refresh_derived_fields(self) -> None:
        """Recompute what the engine derives from the definition (token estimate, deferral, content hash)."""
        tool_fields.refresh_derived_fields(self)

    def save(self, *args, **kwargs):
        self.refresh_derived_fields()
        update_fields = kwargs.get("update_fields")
        if update_fields is not None:
            kwargs["update_fields"] = {*update_fields, *DERIVED_FIELDS, "updated_at"}
        super().save(*args, **kwargs)


class AgentProfile(models.Model):
    # The wire styles a profile may store, from the engine's registry (NATIVE, CLIENT, SERVER): their
    # names are the stored values, their labels the form's choices.
    WireStyle = models.TextChoices("WireStyle", [(s.name.upper(), (s.name, s.label)) for s in profile_styles()])

    class Announcement(models.TextChoices):
        FULL = "full", "Full list every request"
        DELTA = "delta", "Deltas since the last announcement"

    class PromptCache(models.TextChoices):
        DEFAULT = "", "Deployment default (PROMPT_CACHE)"
        ON = "on", "On: cache_control breakpoints on tools, system and the tail"
        OFF = "off", "Off: no breakpoints (OpenAI caches on its own either way)"

    class CacheTTL(models.TextChoices):
        DEFAULT = "", "Deployment default (PROMPT_CACHE_TTL)"
        FIVE_MINUTES = "5m", "5 minutes (write 1.25× input)"
        ONE_HOUR = "1h", "1 hour (write 2× input)"

    class Layout(models.TextChoices):
        FLAT = "flat", "Flat: one name per line (Claude Code)"
        GROUPED = "grouped", "Grouped: one line per MCP server"
        BUDGETED = "budgeted", "Budgeted: grouped, then server summaries within a token budget"

    name = StorableCharField(max_length=100, unique=True)
    system_prompt = StorableTextField(blank=True)
    model = StorableCharField(max_length=100, blank=True, help_text="Empty: the DEFAULT_MODEL setting.")
    tool_search_mode = StorableCharField(
        max_length=40, blank=True,
        help_text="true, false, auto, auto:N (percent of the context window) or auto:Ntokens (e.g. auto:50000tokens); "
                  "empty = unset (the environment's default).",
    )
    wire_style = StorableCharField(max_length=20, choices=WireStyle.choices, default=WireStyle.NATIVE)
    # A key of settings.MODEL_PROVIDERS (pluggable); empty = automatic, resolved when a conversation starts.
    provider = StorableCharField(max_length=40, blank=True)
    # A backend name, or a name with settings (`hybrid:aspect_weight=0`), as the CLI and inspector take them.
    search_backend = StorableCharField(max_length=350, blank=True, help_text="Empty: the default backend.")
    max_results = models.PositiveSmallIntegerField(default=5)
    announcement_style = StorableCharField(max_length=10, choices=Announcement.choices, default=Announcement.FULL)
    announcement_layout = StorableCharField(max_length=10, choices=Layout.choices, default=Layout.FLAT)
    announcement_budget = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(1_000_000)],
        help_text="Budgeted layout's token budget: 0 = 2 % of the context window, otherwise at least 100.",
    )
    # Anthropic prompt caching (engine/prompt_cache.py); empty = the deployment's PROMPT_CACHE / PROMPT_CACHE_TTL.
    prompt_cache = StorableCharField(max_length=3, choices=PromptCache.choices, default=PromptCache.DEFAULT, blank=True)
    prompt_cache_ttl = StorableCharField(max_length=2, choices=CacheTTL.choices, default=CacheTTL.DEFAULT, blank=True,
                                         verbose_name="Prompt cache TTL")
    # The "tool-changes" wire style: the backend ranks the person's message before the turn and the top
    # k scoring at least the threshold are added by tool_addition; ToolSearch stays when `tool_changes_search`.
    tool_changes_k = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(50)], verbose_name="Tools added per turn (k)",
        help_text="Tool changes style: how many predicted tools the harness adds before each of your messages.")
    tool_changes_min_score = models.FloatField(
        default=0.0, validators=[MinValueValidator(0.0)], verbose_name="Score threshold",
        help_text="Tool changes style: a predicted tool is added only when the backend scores it at least this.")
    tool_changes_search = models.BooleanField(
        default=True, verbose_name="Keep ToolSearch",
        help_text="Tool changes style: keep ToolSearch for what the prediction missed (off: the prediction only).")
    load_on_call = models.BooleanField(
        default=False, verbose_name="Load a deferred tool called before its search",
        help_text="Off: the call gets an error naming select:<tool> (Claude Code's answer). On: the tool is loaded "
                  "instead, as select:<tool> would, and the model is asked to call it again (not on OpenAI's tool_search "
                  "styles, which load a function only through a search).",
    )
    allowed_tools = StorableJSONField(default=list, blank=True, help_text="Empty: every tool.")
    disallowed_tools = StorableJSONField(default=list, blank=True)
    is_subagent = models.BooleanField(default=False, help_text="Subject to the global agent denylist.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PermissionRule(models.Model):
    class Effect(models.TextChoices):
        ALLOW = engine_permissions.ALLOW, "Allow"
        ASK = engine_permissions.ASK, "Ask"
        DENY = engine_permissions.DENY, "Deny"

    effect = StorableCharField(max_length=5, choices=Effect.choices)
    pattern = StorableCharField(max_length=80, help_text="Exact tool name, mcp__server, or mcp__server__*")
    profile = models.ForeignKey(
        AgentProfile, null=True, blank=True, on_delete=models.CASCADE, related_name="rules",
        help_text="Empty: a global rule.",
    )
    note = StorableCharField(max_length=300, blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile_id", "pattern", "effect"]

    def __str__(self) -> str:
        scope = self.profile.name if self.profile_id else "global"
        return f"{self.effect} {self.pattern} ({scope})"


class PermissionChange(models.Model):
    """Audit trail of the permissions editor: who changed what, when, before and after."""

    class Action(models.TextChoices):
        CREATE = "create", "Created"
        UPDATE = "update", "Updated"
        DELETE = "delete", "Deleted"

    rule_id = models.PositiveBigIntegerField(null=True)
    action = StorableCharField(max_length=6, choices=Action.choices)
    before = StorableJSONField(null=True, blank=True)
    after = StorableJSONField(null=True, blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-changed_at", "-id"]


class ToolImport(models.Model):
    """An uploaded catalog waiting for confirmation: the preview and the commit read the same text."""

    class Status(models.TextChoices):
        PREVIEWED = "previewed", "Previewed"
        COMMITTED = "committed", "Committed"
        REJECTED = "rejected", "Rejected"

    filename = StorableCharField(max_length=255, blank=True)
    server_name = StorableCharField(max_length=64, blank=True, help_text="For MCP tools/list results: the server key.")
    payload = StorableTextField()
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.PREVIEWED)
    summary = StorableJSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    committed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import #{self.pk} ({self.filename or 'pasted'}, {self.status})"


class ToolEmbedding(models.Model):
    """A tool document's vector, computed once and read by every process and node (instead of each
    encoding the catalog again). Keyed like the engine's embedding cache: sha1(model id, document),
    so a tool whose text did not change keeps its row, and rows of tools that are gone are harmless."""

    key = StorableCharField(max_length=40, unique=True)
    model_id = StorableCharField(max_length=200)
    dim = models.PositiveSmallIntegerField()
    vector = models.BinaryField()  # float32, little-endian, `dim` values
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.key[:12]} ({self.model_id}, {self.dim})"


class SearchIndexBuild(models.Model):
    """One background build of the tool vectors for one catalog version and one encoder
    (`indexing.build_index`): its progress, read by the tools page and by searches that must not
    encode while it runs. A second build of the same version finds this row and does nothing."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        SUPERSEDED = "superseded", "Superseded"  # the catalog changed again; a newer build covers it

    version = StorableCharField(max_length=255, unique=True)  # catalog version | model id
    backend = StorableCharField(max_length=350, blank=True)  # the backend spec whose encoder builds it ("" = default)
    model_id = StorableCharField(max_length=200, blank=True)
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)  # distinct tool texts of the catalog's deferred tools
    embedded = models.PositiveIntegerField(default=0)  # of them, with a stored vector
    encoded = models.PositiveIntegerField(default=0)  # of them, encoded by this build
    error = StorableTextField(blank=True)
    # How often the build's task was sent again because the broker lost it (playground/lost_tasks.py).
    # A queued row is written only when it is queued, so its updated_at is when its task was sent.
    queue_attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"index build {self.version} ({self.status}, {self.embedded}/{self.total})"


class StoredSearchIndex(models.Model):
    """A search backend's prebuilt index of one catalog (the engine's `stored.py`: BM25 postings, the
    dense side's vector keys and vocabulary), written by the background index build and loaded by
    every process instead of analysing the whole catalog again. The key holds the catalog's
    fingerprint and the backend's settings, so a row is only ever loaded for what it was built from;
    only the newest few are kept (`indexes.DatabaseIndexStore`)."""

    key = StorableCharField(max_length=255, unique=True)
    data = models.BinaryField()
    size = models.PositiveIntegerField(default=0)  # bytes
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"stored index {self.key[:60]} ({self.size:,} bytes)"


class LabelledQuery(models.Model):
    """A request a team labelled with the tool it should find: a profile's own labelled set, built
    from where its searches failed (the conversations' "Search misses" page adds a row per query and
    the tool finally called). Queries of one text share one id and so one split, the shared toolsets'
    rule (`quality.split_of`): tuning never sees a test query. Registry sits below conversations, so
    the conversation it came from is a plain id."""

    profile = models.ForeignKey(AgentProfile, on_delete=models.CASCADE, related_name="labelled_queries")
    query = StorableTextField()
    query_hash = StorableCharField(max_length=40)  # sha1 of the query: its id in the labelled set, and its split
    tool_name = StorableCharField(max_length=255)
    conversation_id = models.PositiveBigIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["profile", "query_hash", "tool_name"], name="labelled_query_once")]

    def __str__(self) -> str:
        return f"{self.query[:40]} → {self.tool_name}"


class LearnedRanking(models.Model):
    """One trained version of a profile's learned ranking (engine/search/learned.py): the artefact and
    its figures before and after, on the team's own test split and on every shared test split. Off
    until an editor switches it on, which the evaluation's service allows only when it wins on the
    team's split and loses nothing on the shared ones; at most one version of a profile is on."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        TRAINING = "training", "Training"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    profile = models.ForeignKey(AgentProfile, on_delete=models.CASCADE, related_name="learned_rankings")
    version = models.PositiveIntegerField()
    status = StorableCharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    enabled = models.BooleanField(default=False)
    backend = StorableCharField(max_length=200, blank=True)  # the spec it was trained over ("" = the default)
    encoder_id = StorableCharField(max_length=200, blank=True)
    artefact = models.BinaryField(null=True, blank=True)  # LearnedRanking.to_bytes()
    # {"team": {"train", "test", "before", "after"}, "shared": [{"toolset", "queries", "before", "after"}],
    #  "cross_validation": {...}, "learner_on": bool, "reason": str}
    metrics = StorableJSONField(default=dict, blank=True)
    progress_message = StorableCharField(max_length=200, blank=True)
    error = StorableTextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "version"], name="learned_ranking_version_once"),
            models.UniqueConstraint(fields=["profile"], condition=models.Q(enabled=True), name="learned_ranking_one_on"),
        ]

    def __str__(self) -> str:
        return f"{self.profile_id} v{self.version} ({self.status}{', on' if self.enabled else ''})"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.TRAINING)
