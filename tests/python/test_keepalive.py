"""Keep-alive connections left idle past the server's header timeout, then used again.

The server (hyper) times the wait for a request's headers from the moment a connection is idle,
so an idle keep-alive connection is closed after `--header-timeout-s` without a response. Clients
that check a pooled connection before reusing it (geventhttpclient, aiohttp, httpx) reconnect;
Python's plain `http.client` does not, and its next request on that connection fails with a
ConnectionError (BrokenPipeError or RemoteDisconnected): such a caller must reconnect itself.
aiohttp notices the close only while its event loop runs: idling with a blocking `time.sleep` on
the loop's thread, the aio client's next POST fails with ServerDisconnectedError.
"""

import asyncio
import http.client
import json
import socket
import time
from urllib.parse import urlsplit

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient
from open_inference.openapi.client import OpenInferenceClient

from cases import assert_same, tensor

BODY = json.dumps(
    {"inputs": [{"name": n, "datatype": "INT32", "shape": [2], "data": [1, 2]} for n in "ab"]}
).encode()


@pytest.fixture
def idle(idle_timeout_s):
    """Sleeps past the server's header timeout."""
    return lambda: time.sleep(idle_timeout_s + 1.0)


def add(module):
    x = np.array([1, 2], np.int32)
    return [tensor("a", x, "INT32", False, module), tensor("b", x, "INT32", False, module)]


def test_the_server_closes_an_idle_connection_after_the_header_timeout(idle_url, idle_timeout_s):
    u = urlsplit(idle_url)
    with socket.create_connection((u.hostname, u.port)) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        s.settimeout(idle_timeout_s + 10)
        started = time.monotonic()
        assert s.recv(4096) == b"", "closed without a response"
        waited = time.monotonic() - started
    assert idle_timeout_s - 0.5 <= waited <= idle_timeout_s + 3, waited


def test_tritonclient_reconnects_after_idle(idle_url, idle):
    with httpclient.InferenceServerClient(urlsplit(idle_url).netloc) as c:
        assert c.is_server_live()
        idle()
        assert c.is_server_live()
        idle()
        # A POST too, which geventhttpclient never retries once sent.
        result = c.infer(
            "add",
            add(httpclient),
            outputs=[httpclient.InferRequestedOutput("output", binary_data=False)],
        )
        assert_same(result.as_numpy("output"), np.array([2, 4], np.int32))


def test_tritonclient_aio_reconnects_after_idle(idle_url, idle_timeout_s):
    async def main():
        async with aioclient.InferenceServerClient(urlsplit(idle_url).netloc) as c:
            assert await c.is_server_live()
            # Idle with the event loop running, as an async program idles: aiohttp sees the close.
            await asyncio.sleep(idle_timeout_s + 1.0)
            wanted = [aioclient.InferRequestedOutput("output", binary_data=False)]
            return await c.infer("add", add(aioclient), outputs=wanted)

    assert_same(asyncio.run(main()).as_numpy("output"), np.array([2, 4], np.int32))


def test_open_inference_client_reconnects_after_idle(idle_url, idle):
    c = OpenInferenceClient(base_url=idle_url)
    c.check_server_liveness()
    idle()
    c.check_server_readiness()


def test_plain_http_client_sees_a_closed_connection_after_idle(idle_url, idle):
    u = urlsplit(idle_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", "/v2/health/live")
    assert conn.getresponse().read() == b""
    idle()
    with pytest.raises(ConnectionError):
        conn.request("POST", "/v2/models/add/infer", body=BODY)
        conn.getresponse().read()
    conn.close()
    # A new connection, as the caller must open, works.
    conn.request("POST", "/v2/models/add/infer", body=BODY)
    r = conn.getresponse()
    assert r.status == 200
    assert json.loads(r.read())["outputs"][0]["data"] == [2, 4]
    conn.close()
