"""One client from 16 threads at once, with the GIL released while waiting; a forked child
calling through its parent's client; asyncio awaiting calls."""

import asyncio
import os
import threading
import time

import numpy as np
import pytest

import wasmrpc
from wasmrpc import rpc

SPIN_ARG = np.zeros(1, dtype=np.float32)


def test_one_client_serves_16_threads_at_once(client):
    errors = []
    barrier = threading.Barrier(16)

    def worker(i):
        try:
            barrier.wait()
            for j in range(20):
                a = np.full(100, i, dtype=np.int32)
                b = np.full(100, j, dtype=np.int32)
                if j % 2:
                    out = client.addition_blocking(a, b)
                else:
                    out = client.call("addition", [a, b]).get_value()
                assert (out == i + j).all(), (i, j, out[:3])
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_the_gil_is_released_while_a_call_waits(client):
    result = {}

    def slow_call():
        result["error"] = client.call("spin", [SPIN_ARG], timeout_in_ms=600).get_error()

    caller = threading.Thread(target=slow_call)
    caller.start()
    time.sleep(0.05)
    counted = 0
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        counted += 1
    caller.join()
    assert result["error"][0] == wasmrpc.Code.DEADLINE_EXCEEDED
    # With the GIL held by the waiting thread this loop would not have run at all.
    assert counted > 10_000, counted


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_calls_through_its_parents_client(client):
    assert client.addition_blocking(np.int32(1), np.int32(2)) == 3  # the parent's runtime runs
    pending = client.addition(np.int32(5), np.int32(5))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        status = b"ok"
        try:
            assert client.addition_blocking(np.int32(20), np.int32(22)) == 42
            values = [client.call("addition", [np.int32(i), np.int32(i)]).get_value() for i in range(5)]
            assert values == [0, 2, 4, 6, 8]
            try:
                pending.get_value()  # started in the parent: done there, or cancelled here
            except wasmrpc.CancelledError:
                pass
        except BaseException as e:
            status = repr(e).encode()
        os.write(write_end, status)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert report == b"ok", report.decode()
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's client goes on working.
    assert pending.get_value() == 10
    assert client.addition_blocking(np.int32(1), np.int32(1)) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_client_made_before_any_call_works_in_a_multiprocessing_fork_pool(address):
    import multiprocessing

    global _POOL_CLIENT
    # Inherited through fork by the pool's workers, never pickled.
    _POOL_CLIENT = rpc.Client.create("http", address, name="pool")
    with multiprocessing.get_context("fork").Pool(2) as pool:
        # A bounded wait: a pool whose worker died waits for its task forever.
        values = pool.map_async(_add_in_child, range(4)).get(timeout=60)
    assert values == [0, 2, 4, 6]
    assert _POOL_CLIENT.addition_blocking(np.int32(4), np.int32(4)) == 8


_POOL_CLIENT = None


def _add_in_child(i):
    return int(_POOL_CLIENT.addition_blocking(np.int32(i), np.int32(i)))


def test_calls_are_awaitable_in_asyncio(client):
    async def main():
        one = await client.addition(np.int32(2), np.int32(3))
        many = await asyncio.gather(
            *(client.call("addition", [np.int32(i), np.int32(1)]) for i in range(32))
        )
        with pytest.raises(wasmrpc.DeadlineExceededError):
            await client.call("spin", [SPIN_ARG], timeout_in_ms=200)
        # The loop stays free while calls run: a timer fires during a slow one.
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        with pytest.raises(wasmrpc.DeadlineExceededError):
            await client.call("spin", [SPIN_ARG], timeout_in_ms=300)
        ticker.cancel()
        return one, many, ticks

    one, many, ticks = asyncio.run(main())
    assert one == 5
    assert [int(v) for v in many] == [i + 1 for i in range(32)]
    assert ticks >= 5, ticks


def test_an_awaited_call_can_be_cancelled_by_asyncio(client):
    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(_awaitable(client.call("spin", [SPIN_ARG], timeout_in_ms=1000)), 0.1)
        return await client.addition(np.int32(1), np.int32(1))

    assert asyncio.run(main()) == 2


async def _awaitable(result):
    return await result


def test_a_pickled_client_connects_again_where_it_is_unpickled(address):
    import pickle

    client = rpc.Client.create("http", address, name="pickled", timeout_in_ms=30000)
    copy = pickle.loads(pickle.dumps(client))
    assert copy.name == "pickled" and copy.address == client.address
    assert copy.addition_blocking(np.int32(1), np.int32(2)) == 3


def test_a_client_goes_to_a_spawned_process_pool_as_an_argument(address):
    import concurrent.futures
    import multiprocessing

    client = rpc.Client.create("http", address, name="spawned")
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        assert list(pool.map(_double, [client] * 2, [3, 4])) == [6, 8]


def _double(client, i):
    return int(client.addition_blocking(np.int32(i), np.int32(i)))
