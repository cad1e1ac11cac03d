"""Fixtures of the v2 client tests: the live server that tests/e2e/python_clients.rs started.

The runner passes it in the environment:

- WASMRPC_URL: the server, `http://127.0.0.1:PORT`, with the example guests registered
  (`add`, `add_<dtype>` for every numeric dtype, `upper`, `length`);
- WASMRPC_IDLE_URL: a second server whose header timeout is WASMRPC_TEST_HEADER_TIMEOUT_S seconds;
- WASMRPC_ADD_WASM: the path of the built add guest, for the repository extension's load.
"""

import asyncio
import os
from urllib.parse import urlsplit

import pytest


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


@pytest.fixture
def aio(authority):
    """Runs `body(client)` with a fresh `tritonclient.http.aio` client (default options) on a
    fresh event loop: `aio(lambda c: c.is_server_live())`."""
    import tritonclient.http.aio as aioclient

    def run(body):
        async def main():
            async with aioclient.InferenceServerClient(authority) as c:
                return await body(c)

        return asyncio.run(main())

    return run
