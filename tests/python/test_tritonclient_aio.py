"""tritonclient.http.aio (aiohttp), default options, against the real server.

This client sends `Content-Type: application/octet-stream` even for a JSON body and
`Accept-Encoding: gzip, deflate, br`, yet does not decompress what comes back.
"""

import json

import numpy as np
import pytest
import tritonclient.http.aio as aioclient
from tritonclient.utils import InferenceServerException

import cases
from cases import (
    ADD_CASES,
    BF16_CASE,
    A,
    B,
    assert_came_as,
    assert_same,
    output,
    raw,
    server_error,
    tensor,
)


def add_inputs(binary_a, binary_b):
    return cases.add_inputs(binary_a, binary_b, aioclient)


def test_health_metadata_and_config(aio):
    async def body(c):
        assert await c.is_server_live()
        assert await c.is_server_ready()
        assert (await c.get_server_metadata())["name"] == "wasmrpc"
        assert await c.is_model_ready("add")
        assert not await c.is_model_ready("no_such_model")
        meta = await c.get_model_metadata("add", model_version="1")
        assert (meta["name"], meta["platform"]) == ("add", "wasmrpc_wasm")
        config = await c.get_model_config("add")
        assert config["input"][0]["data_type"] == "TYPE_INT32"

    aio(body)


def test_responses_are_not_compressed_though_the_client_accepts_it(url):
    # What aiohttp sends by default; the aio client reads bodies with auto_decompress=False.
    body = json.dumps(
        {"inputs": [{"name": n, "datatype": "INT32", "shape": [1], "data": [1]} for n in "ab"]}
    ).encode()
    status, headers, data = raw(
        url,
        "POST",
        "/v2/models/add/infer",
        body,
        {"Accept-Encoding": "gzip, deflate, br", "Content-Type": "application/octet-stream"},
    )
    assert status == 200, data
    assert headers.get("Content-Encoding") is None
    assert json.loads(data)["outputs"][0]["data"] == [2]


@pytest.mark.parametrize(
    "binary_a, binary_b, binary_out",
    [(True, True, True), (False, False, False), (True, False, False), (False, True, True)],
    ids=["binary", "json", "binary-a-json-b-json-out", "json-a-binary-b-binary-out"],
)
def test_infer_binary_json_and_mixed(aio, binary_a, binary_b, binary_out):
    async def body(c):
        return await c.infer(
            "add",
            add_inputs(binary_a, binary_b),
            outputs=[output(binary=binary_out, module=aioclient)],
            request_id="aio-1",
        )

    result = aio(body)
    assert result.get_response()["id"] == "aio-1"
    assert_came_as(result, "output", binary=binary_out)
    assert_same(result.as_numpy("output"), A + B)


def test_default_outputs_come_back_binary(aio):
    result = aio(lambda c: c.infer("add", add_inputs(True, True)))
    assert_came_as(result, "output", binary=True)
    assert_same(result.as_numpy("output"), A + B)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize(
    "model, datatype, a, b", ADD_CASES + [BF16_CASE], ids=[c[1] for c in ADD_CASES + [BF16_CASE]]
)
def test_add_every_numeric_datatype(aio, model, datatype, a, b, binary):
    if datatype == "BF16" and not binary:
        # tritonclient itself refuses BF16 as JSON; nothing reaches the server.
        with pytest.raises(InferenceServerException, match="BF16 inputs must be sent as binary"):
            tensor("a", a, datatype, False, aioclient)
        return
    inputs = [
        tensor("a", a, datatype, binary, aioclient),
        tensor("b", b, datatype, binary, aioclient),
    ]
    wanted = [output(binary=binary, module=aioclient)]
    result = aio(lambda c: c.infer(model, inputs, outputs=wanted))
    assert result.get_output("output")["datatype"] == datatype
    assert_came_as(result, "output", binary=binary)
    with np.errstate(over="ignore"):
        assert_same(result.as_numpy("output"), a + b)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_bytes_through_upper(aio, binary):
    words = np.array([b"abc", "é".encode()], dtype=np.object_)
    inputs = [tensor("s", words, "BYTES", binary, aioclient)]
    wanted = [output(binary=binary, module=aioclient)]
    result = aio(lambda c: c.infer("upper", inputs, outputs=wanted))
    assert_came_as(result, "output", binary=binary)
    got = [x.decode() if isinstance(x, bytes) else x for x in result.as_numpy("output")]
    assert got == ["ABC", "É"]


def test_a_16_mib_float32_tensor_round_trips_as_binary(aio):
    n = 4 << 20
    a = np.arange(n, dtype=np.float32)[::-1].copy()
    b = np.full(n, 0.25, np.float32)
    inputs = [tensor("a", a, "FP32", True, aioclient), tensor("b", b, "FP32", True, aioclient)]
    result = aio(lambda c: c.infer("add_float32", inputs))
    assert_came_as(result, "output", binary=True)
    assert_same(result.as_numpy("output"), a + b)


def test_repository_index_load_infer_unload(aio, add_wasm):
    name = "loaded_add_aio"
    config = json.dumps(
        {
            "name": name,
            "platform": "wasmrpc_wasm",
            "parameters": {"export": {"string_value": "add"}},
        }
    )

    async def body(c):
        assert any(m["name"] == "add" for m in await c.get_model_repository_index())
        await c.load_model(name, config=config, files={"file:1/model.wasm": add_wasm})
        assert await c.is_model_ready(name)
        result = await c.infer(name, add_inputs(True, True))
        assert_same(result.as_numpy("output"), A + B)
        await c.unload_model(name)
        assert not await c.is_model_ready(name)
        with pytest.raises(InferenceServerException) as e:
            await c.get_model_metadata(name)
        assert e.value.status() == "404"

    aio(body)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_errors_carry_the_servers_status_and_text(aio, url, binary):
    async def infer(c, model, inputs):
        with pytest.raises(InferenceServerException) as e:
            await c.infer(model, inputs)
        return e.value

    async def body(c):
        e = await infer(c, "no_such_model", add_inputs(binary, binary))
        status, text = server_error(
            url, "POST", "/v2/models/no_such_model/infer", b'{"inputs": []}'
        )
        assert (e.status(), e.message()) == (str(status), text)
        floats = tensor("a", A.astype(np.float32), "FP32", binary, aioclient)
        e = await infer(c, "add", [floats, add_inputs(binary, binary)[1]])
        assert e.status() == "400" and "`a`" in e.message(), e
        short = tensor("a", A, "INT32", binary, aioclient)
        short.set_shape([7])
        e = await infer(c, "add", [short, add_inputs(binary, binary)[1]])
        assert e.status() == "400" and "`a`" in e.message(), e
        e = await infer(c, "add", add_inputs(binary, binary)[:1])
        assert e.status() == "400" and "missing input `b`" in e.message(), e

    aio(body)
