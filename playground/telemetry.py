"""OpenTelemetry export: finished spans, built from saved events, sent by OTLP over HTTP (docs/traces.md).

The apps build a tree of `SpanRecord`s from what they saved (conversations/traces.py,
gateway/traces.py) and hand it to `export`; this module only turns records into SDK spans. Records
carry their own start and end times, so a span tree is the same whichever process ran the loop (a run
that paused on a permission prompt and resumed in another worker is one trace), and ids can be fixed
by a key (`ids_for`), so a gateway session's calls, exported by whichever web process served them,
land under the one session span.

The SDK does the rest as it does for any application: `BatchSpanProcessor` queues spans and a
background thread sends them (the caller never waits on the network; a full queue drops spans), the
exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT, and the resource
OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES. A failing endpoint is logged once per process, never
raised. Off unless OTEL_TRACES_ENABLED. Imports only Django's settings, so every app may use it.
"""
from __future__ import annotations

import contextvars
import hashlib
import hmac
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from playground.per_process import PerProcess

logger = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "toolsearch-playground"
INSTRUMENTATION_NAME = "playground"


@dataclass
class SpanRecord:
    """One span to export: name, kind, times (ns since the epoch), attributes, children. `error`
    (a short, low-cardinality kind) marks it failed (status ERROR, `error.type`)."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    kind: SpanKind = SpanKind.INTERNAL
    error: str = ""
    children: list[SpanRecord] = field(default_factory=list)

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()


def enabled() -> bool:
    return bool(getattr(settings, "OTEL_TRACES_ENABLED", False))


def enduser_id(username: str) -> str | None:
    """A person as traces name them (OTEL_TRACES_ENDUSER_ID): None when off, else their username,
    or a keyed hash of it (HMAC-SHA256 with SECRET_KEY: stable, and no name can be guessed back)."""
    mode = getattr(settings, "OTEL_TRACES_ENDUSER_ID", "off")
    if mode == "off" or not username:
        return None
    if mode == "username":
        return username
    return hmac.new(str(settings.SECRET_KEY).encode(), f"enduser:{username}".encode(), hashlib.sha256).hexdigest()[:32]


def trace_url(trace_id: str) -> str:
    """The trace UI's page of `trace_id` (TRACE_URL_TEMPLATE), or "" when none is set."""
    template = getattr(settings, "TRACE_URL_TEMPLATE", "")
    return template.replace("{trace_id}", trace_id) if template else ""


def ids_for(key: str) -> tuple[int, int]:
    """A (trace id, span id) pair fixed by `key`: the same in every process, never zero."""
    digest = hashlib.sha256(key.encode()).digest()
    return (int.from_bytes(digest[:16], "big") or 1), (int.from_bytes(digest[16:24], "big") or 1)


def export(root: SpanRecord, *, trace_id: int, root_span_id: int | None = None, parent_span_id: int | None = None) -> None:
    """Queue `root` and its children for export in trace `trace_id`.

    `root_span_id` fixes the root's own id (a span others are parented to by key); `parent_span_id`
    hangs the root under a span exported elsewhere (or later). Returns at once: the batch processor's
    thread sends. Raises nothing the caller needs to handle beyond a programming error.
    """
    tracer = _providers.get().get_tracer(INSTRUMENTATION_NAME)
    context = None
    if parent_span_id is not None:
        parent = SpanContext(trace_id=trace_id, span_id=parent_span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        context = trace.set_span_in_context(NonRecordingSpan(parent))
    token = _forced_ids.set((trace_id, root_span_id))
    try:
        _start(tracer, root, context)
    finally:
        _forced_ids.reset(token)


def _start(tracer: trace.Tracer, record: SpanRecord, context) -> None:
    span = tracer.start_span(record.name, context=context, kind=record.kind, attributes=_clean(record.attributes),
                             start_time=record.start_ns)
    _forced_ids.set(None)  # only the root takes the fixed ids; its children get random span ids
    if record.error:
        span.set_attribute("error.type", record.error)
        span.set_status(Status(StatusCode.ERROR, record.error))
    inner = trace.set_span_in_context(span)
    for child in record.children:
        _start(tracer, child, inner)
    span.end(end_time=max(record.end_ns, record.start_ns))


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """OpenTelemetry takes str, bool, int, float and homogeneous lists of them; None is left out."""
    cleaned: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = [str(item) for item in value]
        elif not isinstance(value, (str, bool, int, float)):
            value = str(value)
        cleaned[key] = value
    return cleaned


# -- fixed ids: the root of an export may take its trace and span id from a key ---------------------------
_forced_ids: contextvars.ContextVar[tuple[int, int | None] | None] = contextvars.ContextVar("playground_otel_ids", default=None)


class KeyedIdGenerator(IdGenerator):
    """Random ids, except for the root span of an `export` that fixed them."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        forced = _forced_ids.get()
        return forced[0] if forced is not None else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        forced = _forced_ids.get()
        if forced is not None and forced[1] is not None:
            return forced[1]
        return self._random.generate_span_id()


# -- the exporter: the SDK's OTLP/HTTP one, failures logged once ------------------------------------------
class LogOnceExporter(SpanExporter):
    """Wraps an exporter: a failed export (an endpoint down, a 4xx) is logged once per process, not once
    per batch, and never raises into the batch processor's thread."""

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self.inner, self.endpoint = inner, endpoint
        self.failures = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # noqa: BLE001 - whatever the exporter raised, the spans are lost, not the process
            result, reason = SpanExportResult.FAILURE, f"{exc.__class__.__name__}: {exc}"
        else:
            reason = "the exporter reported a failure"
        if result is not SpanExportResult.SUCCESS:
            self.failures += 1
            if self.failures == 1:
                logger.warning("OpenTelemetry: exporting %d span(s) to %s failed (%s); later failures are not logged",
                               len(spans), self.endpoint, reason)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def traces_endpoint() -> str:
    """Where the SDK's exporter sends, as it decides (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else the
    general endpoint + /v1/traces, else localhost:4318)."""
    specific = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if specific:
        return specific
    general = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return general.rstrip("/") + "/v1/traces"


def make_provider() -> TracerProvider:
    # Imported here: a process with traces off never loads the exporter (nor its HTTP client).
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME})
    provider = TracerProvider(resource=resource, id_generator=KeyedIdGenerator(), shutdown_on_exit=False)
    # The SDK's exporter logs each failed batch (and each retry) itself; LogOnceExporter says it once.
    logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)
    provider.add_span_processor(BatchSpanProcessor(LogOnceExporter(OTLPSpanExporter(), traces_endpoint())))
    return provider


def _shutdown(provider: TracerProvider) -> None:
    provider.shutdown()  # sends what is queued (bounded by the exporter's timeout)


_providers: PerProcess[TracerProvider] = PerProcess(make_provider, close=_shutdown)


def flush(timeout_millis: int = 10_000) -> bool:
    """Send what this process has queued now (tests; a command that exits right after exporting)."""
    provider = _providers.made()
    return provider.force_flush(timeout_millis) if provider is not None else True


def shutdown() -> None:
    """Send what is queued and stop this process's exporter (a worker process that ends)."""
    provider = _providers.made()
    if provider is not None:
        provider.shutdown()
