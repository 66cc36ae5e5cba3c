"""Settings for ToolSearch Playground, driven by environment variables.

Defaults give a working development set-up with no configuration at all: SQLite in the
repository, Redis at localhost:6379 (`make run` embeds one when none answers), DEBUG on.
Every variable is documented in docs/configuration.md and `.env.example`.
"""
from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from playground.engine.pricing import PriceTableError
from playground.engine.pricing import load_overrides as load_price_overrides
from playground.engine.search.backends import BUILTIN_BACKENDS, DEFAULT_BACKEND
from playground.secret_key import development_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def envint(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def envlist(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = envbool("DEBUG", True)
# Without SECRET_KEY, a development run signs with a random key made on its first start and kept in
# the state folder (playground/secret_key.py): never a key anyone can read in the repository.
SECRET_KEY_FILE = Path(os.environ.get("SECRET_KEY_FILE") or BASE_DIR / "var" / "secret_key")
SECRET_KEY = os.environ.get("SECRET_KEY") or (development_secret_key(SECRET_KEY_FILE) if DEBUG else "")
if not SECRET_KEY:
    raise RuntimeError("SECRET_KEY must be set when DEBUG is off")

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]" + (",testserver" if DEBUG else ""))
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "playground.registry",
    "playground.mcp_servers",
    "playground.conversations",
    "playground.evaluation",
    "playground.agenteval",
    "playground.gateway",
    "playground.inbox",
    "playground.accounts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads the request into the database: NUL bytes are a 400, not a server error.
    "playground.middleware.RejectNulBytesMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, so it sees the view's exception first: a 500 with a reference, the details only in the log.
    "playground.incidents.UnexpectedErrorMiddleware",
]

ROOT_URLCONF = "playground.urls"
ASGI_APPLICATION = "playground.asgi.application"
WSGI_APPLICATION = "playground.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "playground.context_processors.playground",
            ],
        },
    },
]

# SQLite in the repository by default; DATABASE_URL (postgres://…) switches to PostgreSQL.
# Set (to "1") by playground/asgi.py while Django starts in an ASGI server: the web process.
ASGI_PROCESS_FLAG = "PLAYGROUND_ASGI_PROCESS"
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Browser tests run Daphne in another process: it needs a file-based test database.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "test_db.sqlite3")}
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # `make run` has a web process and worker processes writing at once: IMMEDIATE transactions take
    # the write lock at BEGIN and wait (timeout) instead of failing with "database is locked" when
    # two read-then-write transactions collide.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
elif (os.environ.get(ASGI_PROCESS_FLAG) == "1" and envbool("DATABASE_POOL", True)
        and not DATABASES["default"].get("CONN_MAX_AGE")):
    # The web process (ASGI) borrows connections from psycopg's pool: opening one for each request,
    # socket message and gateway call cost 5-10 ms, and persistent connections (CONN_MAX_AGE) leak
    # under ASGI, whose sync code runs in short-lived threads. Celery's prefork workers keep Django's
    # plain connections: a pool opened before the fork would be shared by the children.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": envint("DATABASE_POOL_MAX_SIZE", 20),
        "timeout": 10,
        "max_idle": 60,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")  # empty in .env = default
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Redis: Celery broker and the Channels layer (cross-process: the worker broadcasts events).
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
# Redis pub/sub pushes each group message to the processes whose sockets joined the group: nothing
# to poll, no per-message round trips on the receiving web node (the list-based
# `channels_redis.core.RedisChannelLayer` takes three per message, one after another). Both deliver
# at most once; a socket that sees a gap, or reconnects, reads the saved events instead.
CHANNEL_LAYER_BACKEND = os.environ.get("CHANNEL_LAYER_BACKEND") or "channels_redis.pubsub.RedisPubSubChannelLayer"
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": CHANNEL_LAYER_BACKEND,
        "CONFIG": {"hosts": [REDIS_URL], "prefix": os.environ.get("CHANNELS_PREFIX") or "asgi"},
    }
}
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker fetches a task only when it has a free slot to start it at once: a task it holds has
# started, so a task the broker still lists is one no worker took yet (requeue.py relies on it), and
# a Redis restart cannot lose a task a busy worker had fetched ahead.
CELERY_WORKER_DISABLE_PREFETCH = envbool("CELERY_WORKER_DISABLE_PREFETCH", True)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The queue tasks go to by default. The browser tests give their live server and worker a queue of
# their own, so other tests' in-process workers on the same Redis never take each other's tasks.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE") or "celery"
# redis-py 8 reads with a 5 s socket timeout by default, exactly channels-redis's blocking receive
# (BZPOPMIN, 5 s) with the list-based layer: an idle consumer then dies with "Timeout reading from
# ...". Give reads headroom.
CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [{"address": REDIS_URL, "socket_timeout": 30}]

# Model access. With no key the playground runs the offline demo agent (labelled as such).
ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "")
DEFAULT_MODEL = os.environ.get("DEFAULT_MODEL", "claude-sonnet-4-5")
CONTEXT_WINDOW_TOKENS = envint("CONTEXT_WINDOW_TOKENS", 200_000)
# The per-model price table (playground/engine/pricing.py): its dated defaults, overridden by a JSON
# object here or the path of a JSON file holding one: {"claude-sonnet-4-5": {"input": 3, "output": 15}}.
PRICE_TABLE = os.environ.get("PRICE_TABLE", "")
try:  # one policy for a malformed table, in every process: refuse to start, saying what is wrong
    load_price_overrides(PRICE_TABLE)
except PriceTableError as _price_error:
    raise RuntimeError(f"PRICE_TABLE is malformed: {_price_error}") from None

# Traces out (docs/traces.md): each finished conversation run and each gateway session's searches and
# calls become OpenTelemetry spans with the GenAI semantic conventions, sent by OTLP over HTTP. Off by
# default. Where they go is the SDK's own variables (OTEL_EXPORTER_OTLP_ENDPOINT or
# OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME …), read by the SDK.
OTEL_TRACES_ENABLED = envbool("OTEL_TRACES_ENABLED", False) and not envbool("OTEL_SDK_DISABLED", False)
# Also put the ToolSearch query text on its span (semantic conventions: content is opt-in). Tool
# arguments, results and messages never go in a span.
OTEL_TRACES_CAPTURE_QUERIES = envbool("OTEL_TRACES_CAPTURE_QUERIES", False)
# Who ran a conversation, on its spans as `enduser.id` (and `user.id`, which Langfuse and Phoenix read):
# off (the default: no person in a trace), hashed (on, true: a keyed hash of the username, the same
# for one person in every trace, that names nobody outside this deployment) or username.
OTEL_TRACES_ENDUSER_ID = {"": "off", "false": "off", "0": "off", "no": "off", "true": "hashed", "1": "hashed", "on": "hashed",
                          "yes": "hashed"}.get(os.environ.get("OTEL_TRACES_ENDUSER_ID", "").strip().lower(),
                                               os.environ.get("OTEL_TRACES_ENDUSER_ID", "").strip().lower())
if OTEL_TRACES_ENDUSER_ID not in ("off", "hashed", "username"):
    raise RuntimeError(f"OTEL_TRACES_ENDUSER_ID must be off, hashed or username, not {OTEL_TRACES_ENDUSER_ID!r}")
# The trace UI's address of one trace, `{trace_id}` standing for its 32 hex digits: the conversation
# page links its latest run's trace there (e.g. https://cloud.langfuse.com/project/P/traces/{trace_id}).
TRACE_URL_TEMPLATE = os.environ.get("TRACE_URL_TEMPLATE", "").strip()
if TRACE_URL_TEMPLATE and ("{trace_id}" not in TRACE_URL_TEMPLATE or not TRACE_URL_TEMPLATE.startswith(("http://", "https://"))):
    raise RuntimeError("TRACE_URL_TEMPLATE must be an http(s) address holding {trace_id}, "
                       f"e.g. https://cloud.langfuse.com/project/P/traces/{{trace_id}}; got {TRACE_URL_TEMPLATE!r}")

# ToolSearch: true | false | auto | auto:N | auto:Ntokens (empty = unset, Claude Code's default behaviour).
ENABLE_TOOL_SEARCH = os.environ.get("ENABLE_TOOL_SEARCH", "")
# Models that cannot take tool_reference blocks (regular expressions, matched case-insensitively).
TOOL_SEARCH_UNSUPPORTED_MODELS = envlist("TOOL_SEARCH_UNSUPPORTED_MODELS", "haiku")

# Search backends by name → dotted path (django-debug-toolbar style). "default" names one of them.
TOOLSEARCH_BACKENDS = {**BUILTIN_BACKENDS}
TOOLSEARCH_DEFAULT_BACKEND = os.environ.get("TOOLSEARCH_DEFAULT_BACKEND", DEFAULT_BACKEND)
# Where tool vectors are kept: database (every process and node reads them; the default), file (the
# engine's SQLite file of this host, as the CLI uses) or memory (this process only).
TOOLSEARCH_VECTOR_STORE = os.environ.get("TOOLSEARCH_VECTOR_STORE", "database")
# With database or file vectors, a catalog's vectors are built in the background (a Celery task) and a
# search encodes in the request at most this many tools without a vector; beyond it, it answers from
# the last complete index or with the keyword backend, and says so.
TOOLSEARCH_INLINE_EMBED_LIMIT = envint("TOOLSEARCH_INLINE_EMBED_LIMIT", 64)
# A profile's learned ranking is measured on every shared toolset's test split before it may be
# switched on (evaluation/learning.py): 0 = the whole split, else an even sample of this many queries.
LEARNED_RANKING_SHARED_LIMIT = envint("LEARNED_RANKING_SHARED_LIMIT", 0)
# Learning from usage: a keyword ToolSearch query followed by a successful call of a tool it returned
# is kept, and the BM25 and hybrid backends index such queries as the tool's "usage" field.
TOOLSEARCH_LEARN_FROM_USAGE = envbool("TOOLSEARCH_LEARN_FROM_USAGE", True)
TOOLSEARCH_USAGE_MAX_ENTRIES = envint("TOOLSEARCH_USAGE_MAX_ENTRIES", 50_000)  # the most recent are read

# Tools never given to subagents (Claude Code keeps the agent tool itself out, so agents do not nest).
AGENT_TOOL_DENYLIST = envlist("AGENT_TOOL_DENYLIST", "Agent")

# Playground admin created on first run (the password is printed once when not set here).
PLAYGROUND_ADMIN_USERNAME = os.environ.get("PLAYGROUND_ADMIN_USERNAME", "admin")
PLAYGROUND_ADMIN_PASSWORD = os.environ.get("PLAYGROUND_ADMIN_PASSWORD", "")

# Production security: on whenever DEBUG is off, each switchable by its own variable.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if envbool("SECURE_PROXY_SSL", not DEBUG) else None
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if DEBUG else 3600)
# HSTS also covers subdomains and consents to the browsers' preload list (the header only allows a
# submission; nothing is submitted). Set either to false when a subdomain must stay on plain HTTP.
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # MCP servers' credentials (URL userinfo and query values, --token=… arguments) are masked in
    # every record: on the handler, and on the loggers that write a server's URL (so that other
    # handlers, e.g. Celery's, get masked records too).
    "filters": {"scrub_secrets": {"()": "playground.mcp_servers.secrets.ScrubLogFilter"},
                "quiet_permission_denied": {"()": "playground.access.QuietPermissionDenied"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["scrub_secrets"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Django's own console handler (DEBUG only) printed every record a second time beside the
        # root's; one handler, the root's. A 403 is a role check, not a fault: one line, no traceback.
        "django": {"handlers": [], "propagate": True},
        "django.request": {"filters": ["quiet_permission_denied"]},
        **{name: {"filters": ["scrub_secrets"]} for name in (
            "httpx", "httpx2", "mcp.client.streamable_http", "mcp.client.sse", "mcp.client.stdio", "mcp.client.auth.oauth2",
            "client", "celery.app.trace",
        )},
    },
}

# Conversations: model providers by key → dotted path of a ModelProvider subclass
# (playground.conversations.providers.base). No key chosen: ANTHROPIC_API_KEY → "anthropic", else "demo".
MODEL_PROVIDERS = {
    "anthropic": "playground.conversations.providers.anthropic_api.AnthropicProvider",
    "demo": "playground.conversations.providers.demo.DemoAgentProvider",
    "openai": "playground.conversations.providers.openai_api.OpenAIProvider",
    # The demo agent speaking OpenAI's wire; a profile naming "openai" runs with it when there is no OPENAI_API_KEY.
    "demo-openai": "playground.conversations.providers.demo_openai.OpenAIWireDemoAgent",
}
# OpenAI models (the "openai" provider, chosen per agent profile): Responses API, or Chat Completions
# for the functions style; OPENAI_BASE_URL points at any OpenAI-compatible endpoint.
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_MODEL = os.environ.get("OPENAI_MODEL", "gpt-5.4")
# Each SDK's own retries (429, 5xx, timeouts, with backoff) and per-attempt timeout.
OPENAI_MAX_RETRIES = envint("OPENAI_MAX_RETRIES", 2)
OPENAI_TIMEOUT_SECONDS = float(os.environ.get("OPENAI_TIMEOUT_SECONDS") or 60)
ANTHROPIC_MAX_RETRIES = envint("ANTHROPIC_MAX_RETRIES", 2)
ANTHROPIC_TIMEOUT_SECONDS = float(os.environ.get("ANTHROPIC_TIMEOUT_SECONDS") or 60)
# The agent loop: model round trips per person's message, tool call timeout, permission prompt wait.
AGENT_MAX_TURNS = envint("AGENT_MAX_TURNS", 12)
AGENT_MAX_TOKENS = envint("AGENT_MAX_TOKENS", 4096)
TOOL_CALL_TIMEOUT_SECONDS = float(os.environ.get("TOOL_CALL_TIMEOUT_SECONDS") or 30)
PERMISSION_PROMPT_TIMEOUT_SECONDS = float(os.environ.get("PERMISSION_PROMPT_TIMEOUT_SECONDS") or 300)
# How long the MCP workbench's session waits for a person's answer to a server's request (sampling),
# bounded again by the calling tool call's own timeout.
MCP_SERVER_REQUEST_WAIT_SECONDS = float(os.environ.get("MCP_SERVER_REQUEST_WAIT_SECONDS") or 300)
# A server's tools as the registry stores them (docs/architecture.md, "Bounded servers"): real servers
# offer tens to a few hundred tools, with descriptions of a few thousand characters at most.
MCP_MAX_TOOLS_PER_SERVER = envint("MCP_MAX_TOOLS_PER_SERVER", 1000)
MCP_MAX_TOOL_DESCRIPTION_CHARS = envint("MCP_MAX_TOOL_DESCRIPTION_CHARS", 8000)
MCP_MAX_TOOL_SCHEMA_CHARS = envint("MCP_MAX_TOOL_SCHEMA_CHARS", 64_000)
# OAuth to remote MCP servers (docs/architecture.md, "Remote servers with OAuth"): the key that seals
# tokens and client secrets in the database (a Fernet key or any passphrase; unset: derived from
# SECRET_KEY), how long a Connect waits for the person to come back from the authorization server, and
# an optional HTTPS URL where this deployment's client ID metadata document is served (CIMD).
MCP_SECRETS_KEY = os.environ.get("MCP_SECRETS_KEY", "")
MCP_OAUTH_WAIT_SECONDS = float(os.environ.get("MCP_OAUTH_WAIT_SECONDS") or 600)
MCP_OAUTH_CLIENT_METADATA_URL = os.environ.get("MCP_OAUTH_CLIENT_METADATA_URL", "")
# The Protocol view (mcp_servers/protocol_log.py): the newest JSON-RPC messages kept per server and
# per gateway session (0 turns capture off), and how much of one message's JSON is kept.
MCP_PROTOCOL_KEEP_MESSAGES = envint("MCP_PROTOCOL_KEEP_MESSAGES", 500)
MCP_PROTOCOL_MAX_BODY_CHARS = envint("MCP_PROTOCOL_MAX_BODY_CHARS", 20_000)
# ... and of every scope together (gateway sessions come and go): the newest this many messages.
MCP_PROTOCOL_KEEP_TOTAL = envint("MCP_PROTOCOL_KEEP_TOTAL", 100_000)
# A worker running a conversation marks it alive this often; a run whose mark is older than
# AGENT_LOST_SECONDS lost its worker (killed, out of memory, machine gone) and is released.
AGENT_HEARTBEAT_SECONDS = float(os.environ.get("AGENT_HEARTBEAT_SECONDS") or 10)
AGENT_LOST_SECONDS = float(os.environ.get("AGENT_LOST_SECONDS") or 60)
# How often a worker holding a run looks for a cancel request (lease.py): a cancel interrupts the
# model call or tool call in flight within about this long.
AGENT_CANCEL_POLL_SECONDS = float(os.environ.get("AGENT_CANCEL_POLL_SECONDS") or 0.5)
# Conversation runs one worker process carries at once on its event loop (run_host.py): a waiting run
# holds no thread, so this bounds memory, not threads. A full process leaves further runs to others.
AGENT_RUNS_PER_PROCESS = envint("AGENT_RUNS_PER_PROCESS", 200)
if AGENT_RUNS_PER_PROCESS < 1:
    raise RuntimeError(f"AGENT_RUNS_PER_PROCESS ({AGENT_RUNS_PER_PROCESS}) must be 1 or more")
if not AGENT_CANCEL_POLL_SECONDS > 0:
    raise RuntimeError(f"AGENT_CANCEL_POLL_SECONDS ({AGENT_CANCEL_POLL_SECONDS:g}) must be above 0")
if not AGENT_HEARTBEAT_SECONDS > 0 or AGENT_LOST_SECONDS < 3 * AGENT_HEARTBEAT_SECONDS:
    # A lost-after shorter than a few heartbeats would release runs that are only a little late.
    raise RuntimeError(
        f"AGENT_LOST_SECONDS ({AGENT_LOST_SECONDS:g}) must be at least 3 x AGENT_HEARTBEAT_SECONDS "
        f"({AGENT_HEARTBEAT_SECONDS:g}), and the heartbeat above 0"
    )
# Work no worker claimed within AGENT_QUEUE_GRACE_SECONDS of its request (a conversation's run, an
# evaluation, an MCP sync, a search index build), whose task the broker no longer holds (Redis
# restarted, a connection dropped), is handed to the broker again, at most AGENT_QUEUE_ATTEMPTS times;
# then it fails with a reason its page shows (lost_tasks.py). A round looks every half grace; it also
# denies permission prompts past their PERMISSION_PROMPT_TIMEOUT_SECONDS and ends the work of workers
# that died (a heartbeat older than AGENT_LOST_SECONDS).
AGENT_QUEUE_GRACE_SECONDS = float(os.environ.get("AGENT_QUEUE_GRACE_SECONDS") or 15)
AGENT_QUEUE_ATTEMPTS = envint("AGENT_QUEUE_ATTEMPTS", 3)
if not AGENT_QUEUE_GRACE_SECONDS > 0 or AGENT_QUEUE_ATTEMPTS < 0:
    raise RuntimeError("AGENT_QUEUE_GRACE_SECONDS must be above 0 and AGENT_QUEUE_ATTEMPTS at least 0")
# Streaming text (docs/conversations.md, "Streaming text"): the loop saves the text a model streams as
# `text_delta` events, at most one per STREAM_FLUSH_SECONDS per reply (coalesced, so a fast model does
# not write an event per token). The offline demo agent streams its words at DEMO_STREAM_WORDS_PER_SECOND
# (0: all at once), a reply taking at most DEMO_STREAM_MAX_SECONDS (longer texts go faster).
STREAM_FLUSH_SECONDS = float(os.environ.get("STREAM_FLUSH_SECONDS") or 0.25)
DEMO_STREAM_WORDS_PER_SECOND = float(os.environ.get("DEMO_STREAM_WORDS_PER_SECOND", "12") or 0)
DEMO_STREAM_MAX_SECONDS = float(os.environ.get("DEMO_STREAM_MAX_SECONDS") or 6)
if STREAM_FLUSH_SECONDS < 0 or DEMO_STREAM_WORDS_PER_SECOND < 0 or DEMO_STREAM_MAX_SECONDS < 0:
    raise RuntimeError("STREAM_FLUSH_SECONDS, DEMO_STREAM_WORDS_PER_SECOND and DEMO_STREAM_MAX_SECONDS must be 0 or more")
# Read-only share links (sharing.py): the longest expiry an owner may choose, in hours.
SHARE_LINK_MAX_HOURS = envint("SHARE_LINK_MAX_HOURS", 24 * 7)
# Celery beat (`make run`'s beat process, compose's `beat` service) sends that round to any worker.
# A round that waited longer than two intervals for a free worker is dropped: the next one does its work.
BACKGROUND_ROUND_SECONDS = max(0.5, AGENT_QUEUE_GRACE_SECONDS / 2)
CELERY_BEAT_SCHEDULE = {
    "background-round": {
        "task": "playground.background_round",
        "schedule": BACKGROUND_ROUND_SECONDS,
        "options": {"expires": 2 * BACKGROUND_ROUND_SECONDS},
    },
}
# Beat's record of when each entry last ran, in the project's state folder (var/, ignored by git).
CELERY_BEAT_SCHEDULE_FILENAME = os.environ.get("CELERY_BEAT_SCHEDULE_FILENAME") or str(BASE_DIR / "var" / "celerybeat-schedule")
# Compact older messages when the conversation passes this share of the context window.
COMPACTION_THRESHOLD = float(os.environ.get("COMPACTION_THRESHOLD") or 0.8)
# Profiles with wire style "server" use Anthropic's own search tool: bm25 or regex.
ANTHROPIC_SERVER_SEARCH_TOOL = os.environ.get("ANTHROPIC_SERVER_SEARCH_TOOL", "bm25")
# Prompt caching (docs/prompt-cache.md): the agent marks cache_control breakpoints (end of tools, end
# of system, the conversation's tail) with this TTL, 5m or 1h.
PROMPT_CACHE = envbool("PROMPT_CACHE", False)
PROMPT_CACHE_TTL = os.environ.get("PROMPT_CACHE_TTL") or "5m"
if PROMPT_CACHE_TTL not in ("5m", "1h"):
    raise RuntimeError(f"PROMPT_CACHE_TTL ({PROMPT_CACHE_TTL!r}) must be 5m or 1h")

# MCP gateway (docs/gateway.md): browser origins allowed to call /gateway/mcp/<profile id>/ (requests
# without an Origin header, as desktop and command-line clients send them, are not affected), and
# how long an MCP session may stay idle before the server forgets it.
GATEWAY_ALLOWED_ORIGINS = envlist("GATEWAY_ALLOWED_ORIGINS")
GATEWAY_SESSION_IDLE_SECONDS = float(os.environ.get("GATEWAY_SESSION_IDLE_SECONDS") or 1800)
# A call under an "ask" rule waits this long for a person's answer on the session's page (the MCP
# request stays open meanwhile); 0 refuses such calls at once.
GATEWAY_PERMISSION_TIMEOUT_SECONDS = float(os.environ.get("GATEWAY_PERMISSION_TIMEOUT_SECONDS") or 120)
# Tools a client's searches found are remembered per token and client name this long after the last
# search that found them: the client's next sessions start with them (a client that opens a session
# per request can search in one and call in the next). 0 remembers nothing beyond the session.
GATEWAY_DISCOVERY_TTL_SECONDS = float(os.environ.get("GATEWAY_DISCOVERY_TTL_SECONDS") or 3600)
# Requests per token and window, counted in Redis (shared by every web process); over it, 429 with
# Retry-After. 0 turns the limit off.
GATEWAY_RATE_LIMIT_REQUESTS = int(os.environ.get("GATEWAY_RATE_LIMIT_REQUESTS") or 600)
GATEWAY_RATE_LIMIT_WINDOW_SECONDS = float(os.environ.get("GATEWAY_RATE_LIMIT_WINDOW_SECONDS") or 60)
# Failed token checks per client address and window (gateway/auth_guard.py): over it, 429; 0 = off.
GATEWAY_AUTH_FAILURE_LIMIT = int(os.environ.get("GATEWAY_AUTH_FAILURE_LIMIT") or 20)
GATEWAY_AUTH_FAILURE_WINDOW_SECONDS = int(os.environ.get("GATEWAY_AUTH_FAILURE_WINDOW_SECONDS") or 60)
