"""Fixtures of the v2 client tests: the live server that tests/e2e/python_clients.rs started.

The runner passes it in the environment:

- WASMRPC_URL: the server, `http://127.0.0.1:PORT`, with the example guests registered
  (`add`, `add_<dtype>` for every numeric dtype, `upper`, `length`);
- WASMRPC_IDLE_URL: a second server whose header timeout is WASMRPC_TEST_HEADER_TIMEOUT_S seconds;
- WASMRPC_ADD_WASM: the path of the built add guest, for the repository extension's load;
- WASMRPC_KEYED_URL: a third server, with keys, and two tenants: WASMRPC_KEY_A's tenant has `add`
  and `spin` (an infinite loop) and one call slot; WASMRPC_KEY_B's tenant has no models.

The gRPC clients talk to the same servers: gRPC is served on the main port.

KServe's generated protobuf module and tritonclient's both define the `inference.*` messages in
protobuf's one default descriptor pool, so no process can import both ("duplicate symbol
'inference.ServerLiveRequest'"). test_kserve_grpc.py is therefore collected only when
WASMRPC_KSERVE_TESTS=1, and then run alone: python_clients.rs runs pytest twice,
`pytest tests/python` and `WASMRPC_KSERVE_TESTS=1 pytest tests/python/test_kserve_grpc.py`.
"""

import asyncio
import os
from urllib.parse import urlsplit

import pytest


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == "test_kserve_grpc.py" and os.environ.get("WASMRPC_KSERVE_TESTS") != "1":
        return True
    return None


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{name} is not set: these tests run against a live server started by the e2e "
            "suite; run `bash tests/run.sh`, or `WASMRPC_PYTHON=target/py-venv/bin/python "
            "cargo test --test e2e python_clients` after `bash tests/python/setup.sh`"
        )
    return value


@pytest.fixture(scope="session")
def url():
    """`http://127.0.0.1:PORT` of the server under test."""
    return _env("WASMRPC_URL").rstrip("/")


@pytest.fixture(scope="session")
def authority(url):
    """`127.0.0.1:PORT`: tritonclient takes the address without its scheme."""
    return urlsplit(url).netloc


@pytest.fixture(scope="session")
def idle_url():
    """The server with a short header timeout, for the idle keep-alive tests."""
    return _env("WASMRPC_IDLE_URL").rstrip("/")


@pytest.fixture(scope="session")
def idle_timeout_s():
    return float(_env("WASMRPC_TEST_HEADER_TIMEOUT_S"))


@pytest.fixture(scope="session")
def add_wasm():
    """The bytes of the built add guest component."""
    with open(_env("WASMRPC_ADD_WASM"), "rb") as f:
        return f.read()


@pytest.fixture
def client(authority):
    """A `tritonclient.http` client with its default options."""
    import tritonclient.http as httpclient

    with httpclient.InferenceServerClient(authority) as c:
        yield c


def _async_runner(make_client):
    """`run(body)`: `body(client)` with a fresh client from `make_client()` on a fresh event
    loop, the client closed after it."""

    def run(body):
        async def main():
            async with make_client() as c:
                return await body(c)

        return asyncio.run(main())

    return run


@pytest.fixture
def aio(authority):
    """Runs `body(client)` with a fresh `tritonclient.http.aio` client (default options):
    `aio(lambda c: c.is_server_live())`."""
    import tritonclient.http.aio as aioclient

    return _async_runner(lambda: aioclient.InferenceServerClient(authority))


@pytest.fixture
def grpc_client(authority):
    """A `tritonclient.grpc` client with its default options."""
    import tritonclient.grpc as grpcclient

    with grpcclient.InferenceServerClient(authority) as c:
        yield c


@pytest.fixture
def grpc_aio(authority):
    """As `aio`, with a `tritonclient.grpc.aio` client (default options)."""
    import tritonclient.grpc.aio as grpcaio

    return _async_runner(lambda: grpcaio.InferenceServerClient(authority))


@pytest.fixture
def kserve_grpc(authority):
    """As `aio`, with KServe's `InferenceGRPCClient` (default options)."""
    from kserve import InferenceGRPCClient

    return _async_runner(lambda: InferenceGRPCClient(authority))


class Keyed:
    """The server with keys (WASMRPC_KEYED_URL): tenant a (key_a: `add`, `spin`, one call at a
    time) and tenant b (key_b: no models)."""

    def __init__(self):
        self.url = _env("WASMRPC_KEYED_URL").rstrip("/")
        self.authority = urlsplit(self.url).netloc
        self.key_a = _env("WASMRPC_KEY_A")
        self.key_b = _env("WASMRPC_KEY_B")


@pytest.fixture(scope="session")
def keyed():
    return Keyed()
