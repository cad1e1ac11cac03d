"""Calls carry the caller's W3C trace context: that of the span current in OpenTelemetry's
context (when the ``opentelemetry`` package is installed), or a ``traceparent=`` given to the
call, over both rpc layers; without OpenTelemetry, calls go on as before.

What the client sends is read on the wire: the client reaches the real server through a relay
that keeps every byte the client wrote. HTTP/2 compresses headers (HPACK), and the client writes
every header value with HPACK's Huffman code (RFC 7541, appendix B) as a string literal the
first time a connection sends it: the relay's bytes hold that literal exactly when the value was
sent.
"""

import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider

import wasmrpc
from wasmrpc import _trace, rpc

LAYERS = ("http", "grpc")

#: HPACK's Huffman code (RFC 7541, appendix B) of the characters trace headers use here:
#: character -> (code, length in bits).
HUFFMAN = {
    "-": (0x16, 6), "0": (0x0, 5), "1": (0x1, 5), "2": (0x2, 5), "3": (0x19, 6),
    "4": (0x1a, 6), "5": (0x1b, 6), "6": (0x1c, 6), "7": (0x1d, 6), "8": (0x1e, 6),
    "9": (0x1f, 6), "=": (0x20, 6), ",": (0xfa, 8), "a": (0x3, 5), "b": (0x23, 6),
    "c": (0x4, 5), "d": (0x24, 6), "e": (0x5, 5), "f": (0x25, 6), "g": (0x26, 6),
    "h": (0x27, 6), "i": (0x6, 5), "j": (0x74, 7), "k": (0x75, 7), "l": (0x28, 6),
    "m": (0x29, 6), "n": (0x2a, 6), "o": (0x7, 5), "p": (0x2b, 6), "q": (0x76, 7),
    "r": (0x2c, 6), "s": (0x8, 5), "t": (0x9, 5), "u": (0x2d, 6), "v": (0x77, 7),
    "w": (0x78, 7), "x": (0x79, 7), "y": (0x7a, 7), "z": (0x7b, 7),
}


def hpack_literal(text):
    """``text`` as HPACK writes a Huffman-coded string: its length (short strings: one byte,
    high bit set) and the code, padded to a byte with ones."""
    bits, count = 0, 0
    for c in text:
        code, length = HUFFMAN[c]
        bits, count = (bits << length) | code, count + length
    pad = -count % 8
    bits, count = (bits << pad) | ((1 << pad) - 1), count + pad
    coded = bits.to_bytes(count // 8, "big")
    assert len(coded) < 127, "a longer string has a longer length prefix"
    return bytes([0x80 | len(coded)]) + coded


def test_the_huffman_code_is_rfc_7541s():
    # RFC 7541, C.4.2: "no-cache" is written 86 a8eb 1064 9cbf.
    assert hpack_literal("no-cache") == bytes([0x86]) + bytes.fromhex("a8eb10649cbf")


class Relay:
    """A TCP relay on 127.0.0.1 to ``target`` (``host:port``), keeping what clients send."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self._listener.getsockname()[1]
        self._sent = bytearray()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self._target)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source, sink, keep):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if keep:
                    with self._lock:
                        self._sent += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def sent(self):
        with self._lock:
            return bytes(self._sent)

    def close(self):
        self._listener.close()


@pytest.fixture
def relay(address):
    made = Relay(address)
    yield made
    made.close()


def traceparent_of(span_context):
    return "00-%032x-%016x-%02x" % (
        span_context.trace_id,
        span_context.span_id,
        int(span_context.trace_flags),
    )


def remote_parent(trace_state):
    """A context whose span is a remote caller's with ``trace_state``, as a propagator makes
    of incoming headers."""
    parent = otel_trace.SpanContext(
        trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
        trace_state=otel_trace.TraceState(trace_state),
    )
    return otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(parent))


@pytest.fixture
def tracer():
    # A provider of the test's own: the global one can be set only once per process.
    return TracerProvider().get_tracer("wasmrpc-tests")


A, B = np.int32(2), np.int32(3)


@pytest.mark.parametrize("layer", LAYERS)
def test_a_call_inside_a_span_sends_the_spans_context(relay, tracer, layer):
    client = rpc.Client.create(layer, relay.address, timeout_in_ms=30000)
    assert hpack_literal("traceparent") not in relay.sent(), "no span yet: no header"
    with tracer.start_as_current_span("blocking") as span:
        assert client.addition_blocking(A, B) == 5
    assert hpack_literal(traceparent_of(span.get_span_context())) in relay.sent()
    with tracer.start_as_current_span("pending") as span:
        result = client.call("addition", [A, B])
    # Started inside the span, waited for after it.
    assert result.get_value() == 5
    assert hpack_literal(traceparent_of(span.get_span_context())) in relay.sent()
    with tracer.start_as_current_span("method") as span:
        assert client.addition(A, B).get_value() == 5
    assert hpack_literal(traceparent_of(span.get_span_context())) in relay.sent()


@pytest.mark.parametrize("layer", LAYERS)
def test_a_span_under_a_remote_parent_sends_its_trace_and_tracestate(relay, tracer, layer):
    client = rpc.Client.create(layer, relay.address, timeout_in_ms=30000)
    token = otel_context.attach(remote_parent([("congo", "t61rcwkgmze"), ("rojo", "1")]))
    try:
        with tracer.start_as_current_span("child") as span:
            assert client.addition_blocking(A, B) == 5
    finally:
        otel_context.detach(token)
    sent = relay.sent()
    ctx = span.get_span_context()
    assert "%032x" % ctx.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert hpack_literal(traceparent_of(ctx)) in sent
    assert hpack_literal("congo=t61rcwkgmze,rojo=1") in sent


@pytest.mark.parametrize("layer", LAYERS)
def test_an_explicit_traceparent_is_sent_instead_of_the_current_spans(relay, tracer, layer):
    client = rpc.Client.create(layer, relay.address, timeout_in_ms=30000)
    given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tracer.start_as_current_span("ignored") as span:
        result = client.call("addition", [A, B], traceparent=given, tracestate="vendor=value")
        assert result.get_value() == 5
    sent = relay.sent()
    assert hpack_literal(given) in sent
    assert hpack_literal("vendor=value") in sent
    assert hpack_literal(traceparent_of(span.get_span_context())) not in sent


def test_a_malformed_traceparent_is_invalid_argument(client):
    with pytest.raises(wasmrpc.InvalidArgumentError, match="not a W3C traceparent"):
        client.call("addition", [A, B], traceparent="00-not-a-trace-01")
    upper = "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"
    with pytest.raises(wasmrpc.InvalidArgumentError, match="lowercase"):
        client.call("addition", [A, B], traceparent=upper)
    with pytest.raises(wasmrpc.InvalidArgumentError, match="tracestate"):
        client.call(
            "addition",
            [A, B],
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            tracestate="Upper=case",
        )
    with pytest.raises(wasmrpc.InvalidArgumentError, match="goes with a traceparent"):
        client.call("addition", [A, B], tracestate="vendor=value")


def test_without_opentelemetry_calls_send_no_trace_and_still_work(relay, tracer, monkeypatch):
    # As if the package were not installed: importing it fails (a None in sys.modules).
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setattr(_trace, "_otel_trace", _trace._UNSET)
    client = rpc.Client.create("http", relay.address, timeout_in_ms=30000)
    token = otel_context.attach(remote_parent([]))
    try:
        assert client.addition_blocking(A, B) == 5
        assert client.call("addition", [A, B]).get_value() == 5
    finally:
        otel_context.detach(token)
    assert hpack_literal("traceparent") not in relay.sent()


def test_the_package_imports_and_calls_without_opentelemetry(address):
    script = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # importing it raises ImportError\n"
        "import numpy as np\n"
        "from wasmrpc import rpc\n"
        "client = rpc.Client.create('http', sys.argv[1], timeout_in_ms=30000)\n"
        "assert client.addition_blocking(np.int32(2), np.int32(3)) == 5\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, address], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_cluster_calls_carry_the_span_or_the_traceparent_given(cluster, tracer):
    from wasmrpc.coordinator import ClusterCoordinator
    from wasmrpc.distributed import rpc as paddle

    relay = Relay(cluster.workers[0].address)
    try:
        coordinator = ClusterCoordinator(relay.address)
        with tracer.start_as_current_span("schedule") as scheduled:
            value = coordinator.schedule("add", args=(A, B))
        assert value.fetch() == 5
        paddle.init_rpc("traced", master_endpoint=relay.address)
        given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        try:
            assert paddle.rpc_sync("w1", "add", args=(A, B), traceparent=given) == 5
            with tracer.start_as_current_span("rpc_async") as started:
                future = paddle.rpc_async("w2", "add", args=(A, B))
            assert future.wait() == 5
        finally:
            paddle.shutdown()
        sent = relay.sent()
        assert hpack_literal(traceparent_of(scheduled.get_span_context())) in sent
        assert hpack_literal(given) in sent
        assert hpack_literal(traceparent_of(started.get_span_context())) in sent
    finally:
        relay.close()
