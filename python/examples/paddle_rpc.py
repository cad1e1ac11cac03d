"""PaddlePaddle's `paddle.distributed.rpc` example with wasmrpc, line for line: this process
joins the cluster as `worker{rank}`, calls `add` on a worker synchronously and asynchronously,
lists the workers and shuts down.

    bash examples/cluster.sh &     # NATS on 127.0.0.1:4222, workers w0..w2, `add` registered
    python python/examples/paddle_rpc.py 127.0.0.1:4222            # Paddle's snippet: world_size 1
    python python/examples/paddle_rpc.py 127.0.0.1:4222 1 3 &      # three processes, each a worker
    ...

MASTER is the cluster's NATS server (this process becomes a worker, as in Paddle) or any
worker's HTTP address (this process is a client). RANK and WORLD_SIZE default to 0 and 1.
In Paddle `add` is a Python function run on the other worker; here the function's name picks
the method `add` registered in the cluster (the add example's `add`, on int32).
python/tests/test_cluster.py runs this script.
"""

import sys

from wasmrpc.distributed import rpc

master_endpoint = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:4222"
rank = int(sys.argv[2]) if len(sys.argv) > 2 else 0
world_size = int(sys.argv[3]) if len(sys.argv) > 3 else 1


def add(a, b):
    return a + b


rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, master_endpoint=master_endpoint)
to = f"worker{(rank + 1) % world_size}"

ret = rpc.rpc_sync(to, add, args=(2, 3))
print(f"rpc_sync({to}, add, (2, 3)) -> {ret}")

fut = rpc.rpc_async(to, add, args=(2, 3))
print(f"rpc_async({to}, add, (2, 3)).wait() -> {fut.wait()}")

print("get_current_worker_info() ->", rpc.get_current_worker_info())
print(f"get_worker_info({to!r}) ->", rpc.get_worker_info(to))
print("get_all_worker_infos() ->", [w.name for w in rpc.get_all_worker_infos()])

rpc.shutdown()
print("shutdown")
