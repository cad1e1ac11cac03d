"""`rpc.Server` embedded in this Python process (the real server), called from a second
process."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import wasmrpc
from wasmrpc import rpc


def test_a_server_made_in_python_is_called_from_a_second_process(guest, python):
    server = rpc.Server.create("http", "127.0.0.1:0")
    with open(guest("example-add"), "rb") as f:
        info = server.register("addition", f.read(), export="add")  # bytes
    assert info["name"] == "addition" and info["version"] == 1
    server.register("upper", guest("example-strings"), export="upper")  # a path
    server.start()
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        from wasmrpc import rpc
        client = rpc.Client.create("http", sys.argv[1], name="second-process", timeout_in_ms=10000)
        print(int(client.addition_blocking(np.int32(40), np.int32(2))))
        print(client.upper_blocking("from afar").item().decode())
        """
    )
    out = subprocess.run(
        [python, "-c", script, server.address], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["42", "FROM AFAR"]

    # join() returns once shutdown() (here from another thread) has stopped the server.
    stopper = threading.Timer(0.2, server.shutdown)
    stopper.start()
    server.join()
    stopper.join()
    with pytest.raises(wasmrpc.UnavailableError):
        rpc.Client.create("http", server.address, timeout_in_ms=2000)


def test_registering_after_start_and_again_makes_new_versions(guest):
    server = rpc.Server.create("grpc", "localhost:0")
    server.start()
    try:
        server.register("addition", guest("example-add"), export="add")
        again = server.register("addition", guest("example-add"), export="add_int64")
        assert again["version"] == 2
        client = rpc.Client.create("http", server.address)
        assert client.addition_blocking(np.int64(2), np.int64(2)) == 4
    finally:
        server.shutdown()


def test_a_second_start_is_failed_precondition():
    server = rpc.Server.create("http", "127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(wasmrpc.FailedPreconditionError):
            server.start()
    finally:
        server.shutdown()


def test_a_component_that_is_not_one_is_refused_with_the_reason(tmp_path):
    server = rpc.Server.create("http", "127.0.0.1:0")
    with pytest.raises(wasmrpc.InvalidArgumentError):
        server.register("junk", b"not a component")
    with pytest.raises(wasmrpc.InvalidArgumentError, match="reading"):
        server.register("missing", tmp_path / "missing.wasm")
    with pytest.raises(wasmrpc.InvalidArgumentError, match="WebAssembly component"):
        server.register("function", lambda a, b: a + b)
    server.shutdown()


def test_a_taken_port_is_unavailable():
    server = rpc.Server.create("http", "127.0.0.1:0")
    try:
        with pytest.raises(wasmrpc.UnavailableError):
            rpc.Server.create("http", server.address)
    finally:
        server.shutdown()


def test_the_embedded_server_serves_the_rpc_example_from_a_thread_while_python_runs(guest):
    # TF's `server.join()` in a thread of its own, as a serving process would.
    server = rpc.Server.create("http", "127.0.0.1:0")
    server.register("addition", guest("example-add"), export="add")
    server.start()
    joiner = threading.Thread(target=server.join)
    joiner.start()
    client = rpc.Client.create("http", server.address)
    assert client.addition_blocking(np.int32(1), np.int32(2)) == 3
    server.shutdown()
    joiner.join(timeout=10)
    assert not joiner.is_alive()
