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


def _threads_of(pid):
    """What each thread of `pid` is doing, and its signal masks: for a process that hangs."""
    out = []
    try:
        with open(f"/proc/{pid}/status") as f:
            out += [line.strip() for line in f if line.startswith(("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))]
        for tid in sorted(os.listdir(f"/proc/{pid}/task")):
            base = f"/proc/{pid}/task/{tid}"
            fields = []
            for name in ("comm", "wchan", "syscall"):
                try:
                    with open(f"{base}/{name}") as f:
                        fields.append(f.read().strip())
                except OSError as e:
                    fields.append(str(e))
            with open(f"{base}/status") as f:
                fields += [line.strip() for line in f if line.startswith(("State", "SigBlk", "SigPnd"))]
            out.append(f"{tid}: " + " | ".join(fields))
    except OSError as e:
        out.append(str(e))
    return "\n".join(out)


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
    # Python turns SIGINT into KeyboardInterrupt only if it starts with SIGINT at its default, and
    # a shell's background job (`bash tests/run.sh &`) starts with it ignored, as do its children.
    process = subprocess.Popen(
        [python, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout.readline().strip().startswith("127.0.0.1:")
        time.sleep(0.3)
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError("no exit 10 s after SIGINT: " + _threads_of(process.pid))
        assert time.monotonic() - started < 5
        assert process.returncode != 0 and "KeyboardInterrupt" in stderr, stderr
    finally:
        process.kill()


def test_the_readmes_python_example_prints_what_it_says(client, guest, address, python):
    import re

    client.register("add", guest("example-add"), export="add")
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme[readme.index("## From Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len([line for line in code.splitlines() if line.strip()]) == 5
    out = subprocess.run(
        [python, "-c", code.replace("127.0.0.1:8080", address)],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[11 22]"
