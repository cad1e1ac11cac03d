"""open-inference-openapi (httpx and pydantic, generated from the protocol's OpenAPI document): a
strict second client. It needs `platform` in model metadata and `model_name` in infer responses,
and its TensorData model turns every JSON number into a float, so an INT32 input goes out as
`[1.0, 2.0]`."""

import asyncio

import pytest
from open_inference.openapi.client import (
    AsyncOpenInferenceClient,
    InferenceRequest,
    OpenInferenceClient,
)
from open_inference.openapi.core.api_error import ApiError


@pytest.fixture
def oip(url):
    return OpenInferenceClient(base_url=url)


def test_health(oip):
    oip.check_server_liveness()
    oip.check_server_readiness()
    oip.check_model_readiness("add")
    oip.check_model_version_readiness("add", "1")
    with pytest.raises(ApiError) as e:
        oip.check_model_readiness("no_such_model")
    assert e.value.status_code == 404


def test_server_and_model_metadata(oip):
    server = oip.read_server_metadata()
    assert server.name == "wasmrpc"
    assert isinstance(server.extensions, list)
    model = oip.read_model_metadata("add")
    assert (model.name, model.platform, model.versions) == ("add", "wasmrpc_wasm", ["1"])
    assert [(t.name, t.datatype, t.shape) for t in model.inputs] == [
        ("a", "INT32", [-1]),
        ("b", "INT32", [-1]),
    ]
    assert oip.read_model_version_metadata("add", "1") == model


def request(datatype, a, b, **extra):
    return InferenceRequest(
        inputs=[
            {"name": "a", "shape": [2, 2], "datatype": datatype, "data": a},
            {"name": "b", "shape": [2, 2], "datatype": datatype, "data": b},
        ],
        **extra,
    )


def test_infer_float32_json(oip):
    r = oip.model_infer(
        "add_float32", request=request("FP32", [[0.5, 1], [2, 3]], [0.25, 1, 1, 1], id="oip-1")
    )
    assert r.model_name == "add_float32"
    assert r.id == "oip-1"
    [out] = r.outputs
    assert (out.name, out.datatype, out.shape) == ("output", "FP32", [2, 2])
    assert out.data.dict()["__root__"] == [0.75, 2.0, 3.0, 4.0]


# INT32, the add example's own datatype: the client sends integral floats (`1.0`), which the
# protocol's JSON has no other way to tell apart from integers in this client.
def test_infer_int32_json_as_this_client_sends_it(oip):
    r = oip.model_infer("add", request=request("INT32", [[1, 2], [3, 4]], [10, 20, 30, 40]))
    assert r.model_name == "add"
    assert r.model_version == "1"
    assert r.outputs[0].data.dict()["__root__"] == [11, 22, 33, 44]


def test_async_client_infers(url):
    async def main():
        c = AsyncOpenInferenceClient(base_url=url)
        await c.check_server_readiness()
        return await c.model_version_infer(
            "add_float64", "1", request=request("FP64", [0.1, 0.2, 0.3, 0.4], [1, 1, 1, 1])
        )

    r = asyncio.run(main())
    assert r.model_name == "add_float64"
    assert r.outputs[0].data.dict()["__root__"] == [1.1, 1.2, 1.3, 1.4]


def test_bad_request_is_the_clients_bad_request_error(oip):
    from open_inference.openapi.errors.bad_request_error import BadRequestError

    with pytest.raises(BadRequestError) as e:
        oip.model_infer(
            "add_float32",
            request=InferenceRequest(
                inputs=[{"name": "a", "shape": [1], "datatype": "FP32", "data": [1]}]
            ),
        )
    assert e.value.status_code == 400
    assert "missing input `b`" in e.value.body["error"]
