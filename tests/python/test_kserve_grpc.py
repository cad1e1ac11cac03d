"""KServe's own gRPC client (`kserve.InferenceGRPCClient`, grpcio's asyncio API), default options,
against the real server's gRPC service on its main port. Run alone (conftest.py says why):
`WASMRPC_KSERVE_TESTS=1 pytest tests/python/test_kserve_grpc.py`.

The client has health, model readiness and `infer`; server and model metadata go through the stub
it is built on (`client._client_stub`, KServe's generated `GRPCInferenceServiceStub`), which is
what KServe's own code calls. It sends raw tensors (`set_data_from_numpy`, the default) or typed
`contents` (`binary_data=False`), and reads `raw_output_contents`. It has no BF16.
"""

import asyncio
import time

import grpc
import numpy as np
import pytest
from kserve import InferenceGRPCClient, InferInput, InferRequest
from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb

from cases import (
    ADD_CASES,
    UPPER_WORDS,
    WORD_LENGTHS,
    WORDS,
    A,
    B,
    as_text,
    assert_same,
    bearer,
    grpc_code,
    register,
    server_error,
    sixteen_mib_pair,
    unregister,
)


def kserve_input(name, array, datatype, binary=True):
    t = InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array, binary_data=binary)
    return t


def request(model, *tensors):
    return InferRequest(model_name=model, infer_inputs=list(tensors))


def add_request(model="add", binary=True):
    return request(model, kserve_input("a", A, "INT32", binary), kserve_input("b", B, "INT32", binary))


async def refused(call, *args, **kwargs):
    """The grpc.RpcError `await call(*args, **kwargs)` raises."""
    with pytest.raises(grpc.RpcError) as e:
        await call(*args, **kwargs)
    return e.value


def metadata_of(pairs):
    """A dict of metadata as grpc's sequence of pairs."""
    return list(pairs.items()) if pairs else None


def test_health_and_readiness(kserve_grpc):
    async def body(c):
        assert await c.is_server_live()
        assert await c.is_server_ready()
        assert await c.is_model_ready("add")
        assert not await c.is_model_ready("no_such_model")

    kserve_grpc(body)


def test_server_and_model_metadata_through_kserves_stub(kserve_grpc):
    async def body(c):
        server = await c._client_stub.ServerMetadata(pb.ServerMetadataRequest())
        model = await c._client_stub.ModelMetadata(pb.ModelMetadataRequest(name="add"))
        return server, model

    server, model = kserve_grpc(body)
    assert server.name == "wasmrpc"
    assert (model.name, model.platform) == ("add", "wasmrpc_wasm")
    assert [(t.name, t.datatype) for t in model.inputs] == [("a", "INT32"), ("b", "INT32")]


@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
@pytest.mark.parametrize("model, datatype, a, b", ADD_CASES, ids=[c[1] for c in ADD_CASES])
def test_add_every_numeric_datatype(kserve_grpc, model, datatype, a, b, binary):
    if datatype == "FP16" and not binary:
        pytest.skip("KServe sends FP16 only raw: the protocol has no typed field for it")
    req = request(model, kserve_input("a", a, datatype, binary), kserve_input("b", b, datatype, binary))
    response = kserve_grpc(lambda c: c.infer(req))
    (out,) = response.outputs
    assert (out.name, out.datatype) == ("output", datatype)
    with np.errstate(over="ignore"):
        assert_same(out.as_numpy(), a + b)


@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
def test_bytes_through_upper_and_length(kserve_grpc, binary):
    async def body(c):
        upper = await c.infer(request("upper", kserve_input("s", WORDS, "BYTES", binary)))
        length = await c.infer(request("length", kserve_input("s", WORDS, "BYTES", binary)))
        return upper, length

    upper, length = kserve_grpc(body)
    assert as_text(upper.outputs[0].as_numpy()) == UPPER_WORDS
    assert_same(length.outputs[0].as_numpy(), WORD_LENGTHS)


def test_a_16_mib_float32_tensor_round_trips(kserve_grpc):
    a, b = sixteen_mib_pair()
    req = request("add_float32", kserve_input("a", a, "FP32"), kserve_input("b", b, "FP32"))
    got = kserve_grpc(lambda c: c.infer(req)).outputs[0].as_numpy()
    assert got.nbytes == 16 << 20
    assert_same(got, a + b)


def test_repository_load_and_unload_through_kserves_stub(kserve_grpc, url, add_wasm):
    # KServe's RepositoryModelLoadRequest has only a model name, in field 1 (Triton's
    # `repository_name`; its `model_name` is field 2), and no parameters, so no component: the
    # model is registered over HTTP first, and KServe reloads, calls and unloads it.
    name = "loaded_add_kserve"
    register(url, None, name, add_wasm, "add")

    async def body(c):
        await c._client_stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name=name))
        assert await c.is_model_ready(name)
        out = (await c.infer(add_request(name))).outputs[0].as_numpy()
        assert_same(out, A + B)
        await c._client_stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name=name))
        return await c.is_model_ready(name)

    assert not kserve_grpc(body)


def test_errors_carry_the_servers_code_and_text(kserve_grpc, url):
    async def body(c):
        missing = await refused(c.infer, add_request("no_such_model"))
        bad = await refused(c.infer, request("add", kserve_input("a", A, "INT32")))
        return missing, bad

    missing, bad = kserve_grpc(body)
    _, text = server_error(url, "POST", "/v2/models/no_such_model/infer", b'{"inputs": []}')
    assert (grpc_code(missing), missing.details()) == ("NOT_FOUND", text)
    assert grpc_code(bad) == "INVALID_ARGUMENT" and "missing input `b`" in bad.details(), bad


def test_deadline_keys_and_tenants(keyed, add_wasm):
    name = "only_in_a_kserve"
    register(keyed.url, keyed.key_a, name, add_wasm, "add")
    as_a, as_b = metadata_of(bearer(keyed.key_a)), metadata_of(bearer(keyed.key_b))

    async def body():
        async with InferenceGRPCClient(keyed.authority) as c:
            # An infinite loop under a 0.5 s timeout; tenant a's one slot is free right after.
            spin = request("spin", kserve_input("x", np.zeros(1, np.float32), "FP32"))
            started = time.monotonic()
            e = await refused(c.infer, spin, timeout=0.5, headers=as_a)
            assert grpc_code(e) == "DEADLINE_EXCEEDED" and time.monotonic() - started < 3, e
            out = (await c.infer(add_request(), headers=as_a)).outputs[0].as_numpy()
            assert_same(out, A + B)
            # No key, a bad key.
            for headers in (None, metadata_of(bearer("wrpc_0000000000000000_not-a-key"))):
                e = await refused(c.infer, add_request(), headers=headers)
                assert grpc_code(e) == "UNAUTHENTICATED", e

            # Another tenant's model, then no model at all: the same answer.
            async def seen_by_b():
                e = await refused(c.infer, add_request(name), headers=as_b)
                ready = await c.is_model_ready(name, headers=as_b)
                return grpc_code(e), e.details(), ready

            while_in_a = await seen_by_b()
            unregister(keyed.url, keyed.key_a, name)
            missing = await seen_by_b()
            assert while_in_a == missing and missing[0] == "NOT_FOUND", (while_in_a, missing)

    asyncio.run(body())
