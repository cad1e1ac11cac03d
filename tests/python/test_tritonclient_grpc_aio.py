"""tritonclient.grpc.aio (grpcio's asyncio API), default options, against the real server's gRPC
service on its main port."""

import asyncio
import json
import time

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcaio
from tritonclient.utils import InferenceServerException

from cases import (
    ADD_CASES,
    BF16_CASE,
    UPPER_WORDS,
    WORD_LENGTHS,
    WORDS,
    A,
    B,
    add_inputs,
    as_text,
    assert_same,
    bearer,
    grpc_code,
    register,
    server_error,
    sixteen_mib_pair,
    tensor,
    unregister,
)


def inputs():
    return add_inputs(module=grpcaio)


async def refused(call, *args, **kwargs):
    """The InferenceServerException `await call(*args, **kwargs)` raises."""
    with pytest.raises(InferenceServerException) as e:
        await call(*args, **kwargs)
    return e.value


def test_health_metadata_and_config(grpc_aio):
    async def body(c):
        assert await c.is_server_live()
        assert await c.is_server_ready()
        assert (await c.get_server_metadata(as_json=True))["name"] == "wasmrpc"
        assert await c.is_model_ready("add")
        meta = await c.get_model_metadata("add", model_version="1", as_json=True)
        assert (meta["name"], meta["platform"]) == ("add", "wasmrpc_wasm")
        config = (await c.get_model_config("add", as_json=True))["config"]
        assert config["input"][0]["data_type"] == "TYPE_INT32"

    grpc_aio(body)


def test_a_missing_model_is_not_ready(grpc_aio):
    assert not grpc_aio(lambda c: c.is_model_ready("no_such_model"))


@pytest.mark.parametrize(
    "model, datatype, a, b", ADD_CASES + [BF16_CASE], ids=[c[1] for c in ADD_CASES + [BF16_CASE]]
)
def test_add_every_numeric_datatype(grpc_aio, model, datatype, a, b):
    tensors = [tensor("a", a, datatype, module=grpcaio), tensor("b", b, datatype, module=grpcaio)]
    result = grpc_aio(lambda c: c.infer(model, tensors))
    assert result.get_output("output").datatype == datatype
    with np.errstate(over="ignore"):
        assert_same(result.as_numpy("output"), a + b)


def test_bytes_through_upper_and_length(grpc_aio):
    s = [tensor("s", WORDS, "BYTES", module=grpcaio)]

    async def body(c):
        return (await c.infer("upper", s)), (await c.infer("length", s))

    upper, length = grpc_aio(body)
    assert as_text(upper.as_numpy("output")) == UPPER_WORDS
    assert_same(length.as_numpy("output"), WORD_LENGTHS)


def test_a_16_mib_float32_tensor_round_trips(grpc_aio):
    a, b = sixteen_mib_pair()
    tensors = [tensor("a", a, "FP32", module=grpcaio), tensor("b", b, "FP32", module=grpcaio)]
    result = grpc_aio(lambda c: c.infer("add_float32", tensors))
    assert_same(result.as_numpy("output"), a + b)


def test_repository_index_load_infer_unload_and_statistics(grpc_aio, add_wasm):
    name = "loaded_add_grpc_aio"
    config = json.dumps(
        {"name": name, "platform": "wasmrpc_wasm", "parameters": {"export": {"string_value": "add"}}}
    )

    async def body(c):
        index = (await c.get_model_repository_index(as_json=True))["models"]
        assert any(m["name"] == "add" for m in index), index
        await c.load_model(name, config=config, files={"file:1/model.wasm": add_wasm})
        assert await c.is_model_ready(name)
        assert_same((await c.infer(name, inputs())).as_numpy("output"), A + B)
        stats = (await c.get_inference_statistics(name, as_json=True))["model_stats"][0]
        assert int(stats["inference_count"]) == 1, stats
        await c.unload_model(name)
        assert not await c.is_model_ready(name)
        e = await refused(c.get_model_metadata, name)
        assert grpc_code(e) == "NOT_FOUND"

    grpc_aio(body)


def test_errors_carry_the_servers_code_and_text(grpc_aio, url):
    async def body(c):
        e = await refused(c.infer, "no_such_model", inputs())
        _, text = server_error(url, "POST", "/v2/models/no_such_model/infer", b'{"inputs": []}')
        assert (grpc_code(e), e.message()) == ("NOT_FOUND", text)
        e = await refused(c.infer, "add", inputs()[:1])
        assert grpc_code(e) == "INVALID_ARGUMENT" and "missing input `b`" in e.message(), e

    grpc_aio(body)


def test_deadline_keys_and_tenants(keyed, add_wasm):
    name = "only_in_a_grpc_aio"
    register(keyed.url, keyed.key_a, name, add_wasm, "add")
    as_a, as_b = bearer(keyed.key_a), bearer(keyed.key_b)

    async def body():
        async with grpcaio.InferenceServerClient(keyed.authority) as c:
            # An infinite loop under a 0.5 s timeout; tenant a's one slot is free right after.
            spin = [tensor("x", np.zeros(1, np.float32), "FP32", module=grpcaio)]
            started = time.monotonic()
            e = await refused(c.infer, "spin", spin, client_timeout=0.5, headers=as_a)
            assert grpc_code(e) == "DEADLINE_EXCEEDED" and time.monotonic() - started < 3, e
            assert_same((await c.infer("add", inputs(), headers=as_a)).as_numpy("output"), A + B)
            # No key, a bad key.
            for headers in (None, bearer("wrpc_0000000000000000_not-a-key")):
                e = await refused(c.infer, "add", inputs(), headers=headers)
                assert grpc_code(e) == "UNAUTHENTICATED", e
            # Another tenant's model, then no model at all: the same answer.
            async def seen_by_b():
                e = await refused(c.infer, name, inputs(), headers=as_b)
                ready = await c.is_model_ready(name, headers=as_b)
                return grpc_code(e), e.message(), ready

            while_in_a = await seen_by_b()
            unregister(keyed.url, keyed.key_a, name)
            missing = await seen_by_b()
            assert while_in_a == missing and missing[0] == "NOT_FOUND", (while_in_a, missing)

    asyncio.run(body())
