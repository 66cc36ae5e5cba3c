"""A local OTLP/HTTP trace receiver for tests: decodes each POSTed `ExportTraceServiceRequest`
(opentelemetry-proto, what the SDK's exporter sends) and keeps its spans, as a collector would."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from playground import telemetry
from playground.per_process import PerProcess


def attribute_value(value) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [attribute_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    resource: dict[str, Any] = field(default_factory=dict)


class OtlpReceiver:
    """`with OtlpReceiver() as receiver:` — `receiver.url` is the endpoint root (the exporter adds
    /v1/traces), `receiver.spans` what arrived, `receiver.paths` where it was posted."""

    def __init__(self, *, status: int = 200) -> None:
        self.spans: list[ReceivedSpan] = []
        self.paths: list[str] = []
        self.status = status
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.paths.append(self.path)
                if receiver.status == 200:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver._keep(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(receiver.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                resource = {a.key: attribute_value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(ReceivedSpan(
                            name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(), kind=span.kind,
                            start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                            attributes={a.key: attribute_value(a.value) for a in span.attributes},
                            status_code=span.status.code, resource=resource,
                        ))

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)


@pytest.fixture
def fresh_provider(monkeypatch):
    """A tracer provider of this test's own, made on first use from the environment the test set."""
    providers = PerProcess(telemetry.make_provider)
    monkeypatch.setattr(telemetry, "_providers", providers)
    yield providers
    made = providers.made()
    if made is not None:
        made.shutdown()


@pytest.fixture
def receiver(settings, monkeypatch, fresh_provider):
    """Traces on, sent to a local receiver (through the SDK's own OTEL_EXPORTER_OTLP_ENDPOINT)."""
    with OtlpReceiver() as server:
        settings.OTEL_TRACES_ENABLED = True
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "playground-test")
        yield server
