"""Fixtures of the Python SDK's tests: the real `wasmrpc` binary on a loopback port, with
guest components built from source registered on it.

tests/e2e/python_sdk.rs runs these (`bash tests/run.sh` builds and installs the package into
target/py-venv first) and passes:

- WASMRPC_BIN: the server binary cargo built;
- WASMRPC_GUEST_DIR: the folder of the built guest components (`example_add.wasm`...).
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from wasmrpc import rpc


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{name} is not set: these tests run against the real server and guests built by "
            "cargo; run `bash tests/run.sh`, or `cargo test --test e2e python_sdk` after "
            "`bash python/install.sh`"
        )
    return value


@pytest.fixture(scope="session")
def guest_dir():
    return _env("WASMRPC_GUEST_DIR")


@pytest.fixture(scope="session")
def guest(guest_dir):
    """`guest("example-add")`: the path of a built guest component."""

    def path(package):
        return os.path.join(guest_dir, package.replace("-", "_") + ".wasm")

    return path


class ServerProcess:
    """`wasmrpc serve` on 127.0.0.1 and a free port, with its own data directory."""

    def __init__(self, *extra):
        self._dir = tempfile.TemporaryDirectory(prefix="wasmrpc-py-")
        env = dict(os.environ, WASMRPC_LOG=os.environ.get("WASMRPC_TEST_LOG", "off"))
        self.process = subprocess.Popen(
            [_env("WASMRPC_BIN"), "serve", "--listen", "127.0.0.1:0", "--data-dir", self._dir.name, *extra],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        line = self.process.stdout.readline().strip()
        prefix = "wasmrpc listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"unexpected first line from wasmrpc serve: {line!r}")
        self.url = line[len(prefix):]
        self.address = self.url.split("://", 1)[1]

    def stop(self):
        self.process.kill()
        self.process.wait()
        self._dir.cleanup()


# Every method the tests call: name -> (guest package, export).
METHODS = {
    "addition": ("example-add", "add"),
    "upper": ("example-strings", "upper"),
    "length": ("example-strings", "length"),
    "spin": ("guest-hostile", "spin"),
    "unreachable": ("guest-hostile", "unreachable"),
    "fail": ("guest-hostile", "fail"),
    "echo": ("guest-hostile", "echo"),
}
ADD_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
)
for _dtype in ADD_DTYPES:
    METHODS[f"add_{_dtype}"] = ("example-add", f"add_{_dtype}")


@pytest.fixture(scope="session")
def server(guest):
    """The shared server, with every method of METHODS registered."""
    process = ServerProcess()
    try:
        client = rpc.Client.create("http", process.address, name="setup", timeout_in_ms=30000)
        for name, (package, export) in METHODS.items():
            client.register(name, guest(package), export=export)
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def address(server):
    """`127.0.0.1:PORT` of the shared server."""
    return server.address


@pytest.fixture
def client(address):
    return rpc.Client.create("http", address, name="pytest", timeout_in_ms=30000)


@pytest.fixture
def free_port():
    """A port nobody listens on (TF's examples use portpicker for this)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def python():
    """This interpreter, for tests that run a second process."""
    return sys.executable


# -- the cluster: NATS and `wasmrpc serve --cluster` workers ----------------------------------


def nats_server_binary():
    """The nats-server of WASMRPC_NATS_SERVER (tests/run.sh installs it); the test is skipped
    without it, or fails when WASMRPC_REQUIRE_NATS=1."""
    path = os.environ.get("WASMRPC_NATS_SERVER")
    if path and os.path.isfile(path):
        return path
    message = (
        "WASMRPC_NATS_SERVER does not name a nats-server: run `bash tests/nats/setup.sh` and "
        "point WASMRPC_NATS_SERVER at the path it prints (tests/run.sh does)"
    )
    if os.environ.get("WASMRPC_REQUIRE_NATS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NatsProcess:
    """A nats-server with JetStream on a free loopback port, storing in a temporary folder."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="wasmrpc-nats-")
        port = _free_port()
        self.url = f"nats://127.0.0.1:{port}"
        self.address = f"127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [nats_server_binary(), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", self._dir.name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    if s.recv(5) == b"INFO ":
                        break
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("nats-server did not start")
            time.sleep(0.05)

    def stop(self):
        self.process.kill()
        self.process.wait()
        self._dir.cleanup()


class Cluster:
    """NATS and `count` workers w0, w1... (ranks 0, 1...) with `add` (example-add's `add`,
    int32) registered, every worker listed by every other."""

    def __init__(self, guest, count=3):
        self.nats = NatsProcess()
        self.workers = []
        try:
            for i in range(count):
                self.workers.append(
                    ServerProcess("--cluster", self.nats.url, "--name", f"w{i}", "--rank", str(i))
                )
            client = rpc.Client.create("http", self.workers[0].address, name="setup", timeout_in_ms=30000)
            client.register("add", guest("example-add"), export="add")
            # Registrations and members reach every worker within a second.
            deadline = time.monotonic() + 10
            for worker in self.workers:
                peer = rpc.Client.create("http", worker.address, name="setup", timeout_in_ms=30000)
                while "add" not in {m["name"] for m in peer.list_registered_methods()}:
                    assert time.monotonic() < deadline, f"add never reached {worker.address}"
                    time.sleep(0.05)
                    peer.refresh()
        except BaseException:
            self.stop()
            raise

    def stop(self):
        for worker in self.workers:
            worker.stop()
        self.nats.stop()


@pytest.fixture
def cluster(guest):
    """A fresh three-worker cluster (tests kill its workers)."""
    nats_server_binary()
    made = Cluster(guest)
    try:
        yield made
    finally:
        made.stop()
