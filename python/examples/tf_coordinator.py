"""TensorFlow's `ClusterCoordinator.schedule` example with wasmrpc: ten calls of `add` scheduled
on any available worker of the cluster, joined, then fetched.

    bash examples/cluster.sh &     # NATS, workers w0..w2 on 127.0.0.1:8081..8083, `add` registered
    python python/examples/tf_coordinator.py 127.0.0.1:8081

In TensorFlow the coordinator comes from a `ParameterServerStrategy` and `schedule` takes a
`tf.function`; here it comes from any worker's address, and the function's name picks the method
registered in the cluster. python/tests/test_cluster.py runs this script.
"""

import sys

import numpy as np

from wasmrpc.coordinator import ClusterCoordinator

coordinator = ClusterCoordinator(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:8081")


def add(a, b):
    return a + b


results = [coordinator.schedule(add, args=(np.int32(i), np.int32(1))) for i in range(10)]
coordinator.join()
print("done:", coordinator.done())
print("fetched:", [int(v) for v in coordinator.fetch(results)])
print("get:", int(results[0].get()))
