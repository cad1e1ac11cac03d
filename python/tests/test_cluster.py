"""Paddle's `paddle.distributed.rpc` and TF's `ClusterCoordinator` against a real cluster: a
nats-server and `wasmrpc serve --cluster` workers (conftest.Cluster), or Python processes that
join it as workers themselves."""

import ast
import os
import signal
import subprocess
import textwrap
import time

import numpy as np
import pytest

import wasmrpc
from wasmrpc import rpc as tf_rpc
from wasmrpc.coordinator import ClusterCoordinator, RemoteValue
from wasmrpc.distributed import rpc


EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def _run(python, *args):
    return subprocess.Popen(
        [python, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_paddle_example_as_a_client_of_three_workers(cluster, python):
    # Paddle's own snippet (world_size 1, `worker0` calling itself) through a worker's address:
    # this process is a client, and `worker0` is the worker it is connected to.
    w0 = cluster.workers[0]
    process = _run(python, os.path.join(EXAMPLES, "paddle_rpc.py"), w0.address)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    lines = out.splitlines()
    port = int(w0.address.rsplit(":", 1)[1])
    assert lines == [
        "rpc_sync(worker0, add, (2, 3)) -> 5",
        "rpc_async(worker0, add, (2, 3)).wait() -> 5",
        f"get_current_worker_info() -> {{name: w0, rank: 0, ip: 127.0.0.1, port: {port}}}",
        f"get_worker_info('worker0') -> {{name: w0, rank: 0, ip: 127.0.0.1, port: {port}}}",
        "get_all_worker_infos() -> ['w0', 'w1', 'w2']",
        "shutdown",
    ]


def test_paddle_example_in_three_processes_each_a_worker(cluster, python):
    # As in Paddle, every process calls init_rpc and is a worker: each joins through the NATS
    # server's bare host:port and serves the cluster's methods from its own process. The
    # cluster's own workers w0..w2 are there too: init_rpc waits for the three processes.
    processes = []
    try:
        for rank in range(3):
            processes.append(
                _run(python, os.path.join(EXAMPLES, "paddle_rpc.py"), cluster.nats.address, str(rank), "3")
            )
            if rank == 0:
                time.sleep(1)  # the first waits at init_rpc for the others
        outs = [p.communicate(timeout=120) for p in processes]
        for rank, (process, (out, err)) in enumerate(zip(processes, outs)):
            assert process.returncode == 0, f"worker{rank}: {err}"
            lines = out.splitlines()
            to = f"worker{(rank + 1) % 3}"
            assert lines[0] == f"rpc_sync({to}, add, (2, 3)) -> 5", out
            assert lines[1] == f"rpc_async({to}, add, (2, 3)).wait() -> 5", out
            assert lines[2].startswith(
                f"get_current_worker_info() -> {{name: worker{rank}, rank: {rank}, ip: 127.0.0.1, port: "
            ), out
            assert lines[3].startswith(f"get_worker_info({to!r}) -> {{name: {to}, rank: {(rank + 1) % 3}, "), out
            workers = ast.literal_eval(lines[4].split(" -> ", 1)[1])
            assert {"worker0", "worker1", "worker2"} <= set(workers), out
            assert lines[5] == "shutdown", out
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_shutdown_is_a_barrier_and_init_rpc_can_follow_it(cluster, python):
    # One process shuts down at once, the other 1.5 s later: the first waits for the second.
    script = textwrap.dedent(
        """
        import sys, time
        from wasmrpc.distributed import rpc
        rpc.init_rpc(sys.argv[2], world_size=2, master_endpoint=sys.argv[1])
        time.sleep(float(sys.argv[3]))
        started = time.monotonic()
        rpc.shutdown()
        print(f"{time.monotonic() - started:.2f}")
        """
    )
    address = cluster.workers[1].address
    first = _run(python, "-c", script, address, "barrier-a", "0")
    second = _run(python, "-c", script, address, "barrier-b", "1.5")
    (out_a, err_a), (out_b, err_b) = first.communicate(timeout=60), second.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, err_a + err_b
    assert float(out_a) >= 1.0, f"the first shutdown returned after {out_a} s, before the second arrived"
    assert float(out_b) < 1.0

    # After shutdown, init_rpc starts again.
    rpc.init_rpc("again", master_endpoint=address)
    try:
        assert rpc.rpc_sync("w2", "add", args=(np.int32(1), np.int32(2))) == 3
    finally:
        rpc.shutdown()


def test_paddle_errors_name_what_went_wrong(cluster, address):
    with pytest.raises(wasmrpc.FailedPreconditionError, match="init_rpc"):
        rpc.rpc_sync("w0", "add", args=(1, 2))
    with pytest.raises(ValueError, match="master_endpoint"):
        rpc.init_rpc("nowhere")
    # A lone server (no --cluster) is not a cluster.
    with pytest.raises(wasmrpc.FailedPreconditionError):
        rpc.init_rpc("lonely", master_endpoint=address)

    rpc.init_rpc("errors", master_endpoint=cluster.workers[0].address)
    try:
        with pytest.raises(wasmrpc.FailedPreconditionError, match="already initialised"):
            rpc.init_rpc("errors", master_endpoint=cluster.workers[0].address)
        with pytest.raises(wasmrpc.NotFoundError):
            rpc.get_worker_info("nobody")
        with pytest.raises(wasmrpc.NotFoundError):
            rpc.rpc_sync("w1", "no_such_method", args=(1,))
        with pytest.raises(wasmrpc.InvalidArgumentError, match="kwargs"):
            rpc.rpc_sync("w1", "add", kwargs={"a": 1})
        with pytest.raises(wasmrpc.InvalidArgumentError):
            rpc.rpc_sync("w1", "add", args=(np.float32(1.5), np.float32(2)))

        # A named call to a worker that is gone: UNAVAILABLE within its timeout, never a hang.
        for name in ("nobody", "w2"):
            if name == "w2":
                cluster.workers[2].stop()
            started = time.monotonic()
            with pytest.raises(wasmrpc.UnavailableError):
                rpc.rpc_sync(name, "add", args=(1, 2), timeout=5)
            assert time.monotonic() - started < 10
        fut = rpc.rpc_async("w2", "add", args=(1, 2), timeout=5)
        with pytest.raises(wasmrpc.UnavailableError):
            fut.wait()
        assert fut.done()
        # The others still answer.
        assert rpc.rpc_sync(rpc.get_worker_info("w1"), "add", args=(20, 22)) == 42
        futures = [rpc.rpc_async("w1", "add", args=(i, 1)) for i in range(50)]
    finally:
        rpc.shutdown()
    # shutdown waited for every call this process started.
    assert all(f.done() for f in futures)
    assert [int(f.wait()) for f in futures] == list(range(1, 51))


def test_schedule_with_a_worker_killed_midway_resolves_every_value(cluster):
    coordinator = ClusterCoordinator(cluster.workers[0].address)
    victim = cluster.workers[2]
    started = time.monotonic()
    values = []
    cancelled_at_join = 0
    for i in range(400):
        if i == 150:
            # Half of this batch is in flight, some of it on the victim.
            victim.process.send_signal(signal.SIGKILL)
        values.append(coordinator.schedule("add", args=(np.int32(i), np.int32(1))))
        if i % 100 == 99:
            # A bounded number in flight, as a training loop would keep.
            try:
                coordinator.join()
            except wasmrpc.CancelledError:
                cancelled_at_join += 1
    coordinator.join()
    assert coordinator.done()
    delivered = cancelled = wrong = 0
    for i, value in enumerate(values):
        assert value.done(), f"scheduled call {i} is not done after join"
        try:
            if int(value.fetch()) == i + 1:
                delivered += 1
            else:
                wrong += 1
        except wasmrpc.CancelledError:
            cancelled += 1
    print(
        f"400 scheduled calls, a worker killed after 150: {delivered} delivered, {cancelled} "
        f"cancelled, 0 hung, {wrong} wrong, in {time.monotonic() - started:.1f} s"
    )
    assert wrong == 0
    assert delivered + cancelled == 400, "none lost"
    assert delivered > 0


def test_the_coordinator_fetches_structures_awaits_and_explains_bad_input(cluster):
    client = tf_rpc.Client.create("http", cluster.workers[1].address, timeout_in_ms=30000)
    coordinator = ClusterCoordinator(client)
    values = {"a": coordinator.schedule("add", args=(np.int32(1), np.int32(2))),
              "b": [coordinator.schedule("add", args=(3, 4))]}
    coordinator.join()
    assert coordinator.fetch(values) == {"a": 3, "b": [7]}
    assert isinstance(values["a"], RemoteValue) and values["a"].get() == 3

    import asyncio

    async def scheduled():
        return await coordinator.schedule("add", args=(np.int32(5), np.int32(6)))

    assert asyncio.run(scheduled()) == 11

    missing = coordinator.schedule("no_such_method", args=(1,))
    with pytest.raises(wasmrpc.NotFoundError):
        coordinator.join()
    with pytest.raises(wasmrpc.NotFoundError):
        missing.fetch()
    with pytest.raises(wasmrpc.InvalidArgumentError):
        ClusterCoordinator(None)
    with pytest.raises(wasmrpc.InvalidArgumentError, match="kwargs"):
        coordinator.schedule("add", kwargs={"a": 1})


def test_the_tf_coordinator_example_runs(cluster, python):
    process = _run(python, os.path.join(EXAMPLES, "tf_coordinator.py"), cluster.workers[2].address)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert out.splitlines() == [
        "done: True",
        "fetched: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]",
        "get: 1",
    ]


def test_a_worker_serves_on_paddles_worker_endpoint(cluster, free_port, monkeypatch):
    # Paddle's get_worker_info example sets PADDLE_WORKER_ENDPOINT before init_rpc.
    monkeypatch.setenv("PADDLE_WORKER_ENDPOINT", f"127.0.0.1:{free_port}")
    rpc.init_rpc("worker9", rank=9, master_endpoint=cluster.nats.url)
    try:
        info = rpc.get_worker_info("worker9")
        assert (info.name, info.rank, info.ip, info.port) == ("worker9", 9, "127.0.0.1", free_port)
        assert rpc.get_current_worker_info() == info
        # It serves the cluster's methods: a call for it by name, sent to another worker.
        import json
        import urllib.request

        body = json.dumps({"args": [
            {"dtype": "int32", "shape": [1], "data": [4]},
            {"dtype": "int32", "shape": [1], "data": [5]},
        ]}).encode()
        request = urllib.request.Request(
            f"http://{cluster.workers[0].address}/v1/methods/add/call?worker=worker9",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.load(response)["outputs"][0]["data"] == [9]
        assert rpc.rpc_sync("worker9", "add", args=(1, 2)) == 3
        assert str(info) == f"{{name: worker9, rank: 9, ip: 127.0.0.1, port: {free_port}}}"
    finally:
        rpc.shutdown()
    # Gone from the list once it has shut down.
    rpc.init_rpc("observer", master_endpoint=cluster.workers[0].address)
    try:
        deadline = time.monotonic() + 10
        while "worker9" in [w.name for w in rpc.get_all_worker_infos()]:
            assert time.monotonic() < deadline, "worker9 never left"
            time.sleep(0.1)
    finally:
        rpc.shutdown()
