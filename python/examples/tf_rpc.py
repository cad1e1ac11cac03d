"""TensorFlow's `tf.distribute.experimental.rpc` example with wasmrpc: a server embedded in this
process serves the add example's `add` as `addition`, and a client calls it three ways.

    python python/examples/tf_rpc.py [PATH/TO/example_add.wasm]

The component defaults to target/guests/wasm32-wasip2/guest/example_add.wasm, which
`bash examples/serve.sh` builds (or `cargo build --profile guest --target wasm32-wasip2
-p example-add --target-dir target/guests`). python/tests/test_examples.py runs this script.
"""

import sys

import numpy as np

import wasmrpc
from wasmrpc import rpc

component = sys.argv[1] if len(sys.argv) > 1 else "target/guests/wasm32-wasip2/guest/example_add.wasm"

server = rpc.Server.create("grpc", "localhost:0")
server.register("addition", component, export="add")
server.start()

client = rpc.Client.create("grpc", address=server.address, name="test_client")
a = np.array(2, dtype=np.int32)
b = np.array(3, dtype=np.int32)

result = client.call(args=[a, b], method_name="addition", output_specs=wasmrpc.TensorSpec((), np.int32))
if result.is_ok():
    print("client.call              ->", result.get_value())

result = client.addition(a, b)
if result.is_ok():
    print("client.addition          ->", result.get_value())

print("client.addition_blocking ->", client.addition_blocking(a, b))

try:
    client.call("addition", [np.float32(2), b]).get_value()
except wasmrpc.InvalidArgumentError as e:
    print("a float32 argument       ->", type(e).__name__, e.code, e.message)

server.shutdown()
