"""The example script runs as docs/python.md shows it, and a blocked server.join() ends with
Ctrl-C."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def test_the_tf_rpc_example_prints_the_sum_three_ways(guest, python):
    out = subprocess.run(
        [python, os.path.join(EXAMPLES, "tf_rpc.py"), guest("example-add")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        "client.call              -> 5",
        "client.addition          -> 5",
        "client.addition_blocking -> 5",
    ]
    assert lines[3].startswith("a float32 argument       -> InvalidArgumentError INVALID_ARGUMENT")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
def test_ctrl_c_ends_a_server_join(python):
    script = textwrap.dedent(
        """
        from wasmrpc import rpc
        server = rpc.Server.create("http", "127.0.0.1:0")
        server.start()
        print(server.address, flush=True)
        server.join()
        """
    )
    process = subprocess.Popen([python, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip().startswith("127.0.0.1:")
        time.sleep(0.3)
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=10)
        assert time.monotonic() - started < 5
        assert process.returncode != 0 and "KeyboardInterrupt" in stderr, stderr
    finally:
        process.kill()
