"""End to end: a call made inside an OpenTelemetry span becomes, on the server, that span's
child. The server exports its spans over OTLP/HTTP to a receiver here, built on the official
``opentelemetry-proto`` definitions; the test reads the server's span back and checks its trace
and parent, over both rpc layers."""

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider

from wasmrpc import rpc

from conftest import ServerProcess


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: ``POST /v1/traces``, protobuf bodies."""

    def __init__(self):
        self.spans = []
        lock = self._lock = threading.Lock()
        spans = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                with lock:
                    for resource_spans in request.resource_spans:
                        for scope_spans in resource_spans.scope_spans:
                            spans.extend(scope_spans.spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = "http://127.0.0.1:%d" % self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def wait_for(self, check, within=10.0):
        deadline = time.monotonic() + within
        while True:
            with self._lock:
                found = [s for s in self.spans if check(s)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def close(self):
        self._server.shutdown()


@pytest.fixture
def traced(guest):
    """A server exporting its traces to a receiver of the test's (batches leave within 50 ms)."""
    receiver = Receiver()
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "50"
    try:
        process = ServerProcess("--otlp-endpoint", receiver.endpoint)
    finally:
        del os.environ["OTEL_BSP_SCHEDULE_DELAY"]
    try:
        setup = rpc.Client.create("http", process.address, name="setup", timeout_in_ms=30000)
        setup.register("addition", guest("example-add"), export="add")
        yield process, receiver
    finally:
        process.stop()
        receiver.close()


@pytest.mark.parametrize("layer", ("http", "grpc"))
def test_the_servers_span_is_a_child_of_the_callers(traced, layer):
    process, receiver = traced
    tracer = TracerProvider().get_tracer("wasmrpc-tests")
    client = rpc.Client.create(layer, process.address, timeout_in_ms=30000)
    with tracer.start_as_current_span("client-side") as span:
        assert client.addition_blocking(np.int32(2), np.int32(3)) == 5
    ours = span.get_span_context()
    kind_server = 2
    found = receiver.wait_for(
        lambda s: s.trace_id == ours.trace_id.to_bytes(16, "big") and s.kind == kind_server
    )
    assert len(found) == 1, "the server's span, in the caller's trace"
    server_span = found[0]
    assert server_span.parent_span_id == ours.span_id.to_bytes(8, "big")
    attributes = {kv.key: kv.value for kv in server_span.attributes}
    assert attributes["wasmrpc.method"].string_value == "addition"
    assert attributes["wasmrpc.code"].string_value == "OK"
    children = receiver.wait_for(
        lambda s: s.parent_span_id == server_span.span_id and s.name == "run"
    )
    assert children, "the guest's run is the server span's child"
