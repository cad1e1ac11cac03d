"""PaddlePaddle's ``paddle.distributed`` over wasmrpc: :mod:`wasmrpc.distributed.rpc`."""
