"""tritonclient.http (geventhttpclient), default options, against the real server."""

import json

import numpy as np
import pytest
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
    assert_came_as,
    assert_same,
    output,
    server_error,
    sixteen_mib_pair,
    tensor,
)


def test_health_and_server_metadata(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "wasmrpc"
    assert isinstance(meta["version"], str)
    assert isinstance(meta["extensions"], list)


def test_server_advertises_the_extensions_the_clients_use(client):
    extensions = client.get_server_metadata()["extensions"]
    assert "binary_tensor_data" in extensions, extensions
    assert "model_repository" in extensions, extensions


def test_model_ready_metadata_and_config(client):
    assert client.is_model_ready("add")
    assert client.is_model_ready("add", model_version="1")
    assert not client.is_model_ready("no_such_model")
    meta = client.get_model_metadata("add")
    assert meta["name"] == "add"
    assert meta["platform"] == "wasmrpc_wasm"
    assert [(t["name"], t["datatype"]) for t in meta["inputs"]] == [("a", "INT32"), ("b", "INT32")]
    assert [(t["name"], t["datatype"]) for t in meta["outputs"]] == [("output", "INT32")]
    assert client.get_model_metadata("add", model_version="1") == meta
    config = client.get_model_config("add")
    assert config["name"] == "add"
    assert config["max_batch_size"] == 0
    assert [(t["name"], t["data_type"]) for t in config["input"]] == [
        ("a", "TYPE_INT32"),
        ("b", "TYPE_INT32"),
    ]
    assert all(t["dims"] for t in config["input"] + config["output"])
    strings = client.get_model_config("upper")
    assert strings["input"][0]["data_type"] == "TYPE_STRING"


# outputs=None is the client's default: it then asks for every output as binary data
# (`parameters.binary_data_output`).
@pytest.mark.parametrize("outputs", ["default", "requested"])
def test_infer_binary_both_ways(client, outputs):
    wanted = None if outputs == "default" else [output(binary=True)]
    result = client.infer("add", add_inputs(True, True), outputs=wanted, request_id="bin-1")
    assert result.get_response()["id"] == "bin-1"
    assert result.get_response()["model_name"] == "add"
    assert_came_as(result, "output", binary=True)
    assert_same(result.as_numpy("output"), A + B)


def test_infer_json_both_ways(client):
    result = client.infer("add", add_inputs(False, False), outputs=[output(binary=False)])
    assert_came_as(result, "output", binary=False)
    assert_same(result.as_numpy("output"), A + B)


@pytest.mark.parametrize(
    "binary_a, binary_b, binary_out",
    [(True, False, False), (False, True, True)],
    ids=["binary-a-json-b-json-out", "json-a-binary-b-binary-out"],
)
def test_infer_mixed_binary_and_json(client, binary_a, binary_b, binary_out):
    result = client.infer(
        "add", add_inputs(binary_a, binary_b), outputs=[output(binary=binary_out)]
    )
    assert_came_as(result, "output", binary=binary_out)
    assert_same(result.as_numpy("output"), A + B)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("model, datatype, a, b", ADD_CASES, ids=[c[1] for c in ADD_CASES])
def test_add_every_numeric_datatype(client, model, datatype, a, b, binary):
    result = client.infer(
        model,
        [tensor("a", a, datatype, binary), tensor("b", b, datatype, binary)],
        outputs=[output(binary=binary)],
    )
    assert result.get_output("output")["datatype"] == datatype
    assert_came_as(result, "output", binary=binary)
    with np.errstate(over="ignore"):
        assert_same(result.as_numpy("output"), a + b)


def test_add_bfloat16_with_ml_dtypes(client):
    model, datatype, a, b = BF16_CASE
    result = client.infer(model, [tensor("a", a, datatype, True), tensor("b", b, datatype, True)])
    assert result.get_output("output")["datatype"] == "BF16"
    assert_same(result.as_numpy("output"), a + b)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_bytes_tensors_through_upper_and_length(client, binary):
    result = client.infer(
        "upper", [tensor("s", WORDS, "BYTES", binary)], outputs=[output(binary=binary)]
    )
    assert_came_as(result, "output", binary=binary)
    got = result.as_numpy("output")
    assert got.shape == (2, 2)
    assert as_text(got) == UPPER_WORDS
    result = client.infer(
        "length", [tensor("s", WORDS, "BYTES", binary)], outputs=[output(binary=binary)]
    )
    assert_same(result.as_numpy("output"), WORD_LENGTHS)


def test_a_16_mib_float32_tensor_round_trips_as_binary(client):
    a, b = sixteen_mib_pair()
    result = client.infer(
        "add_float32", [tensor("a", a, "FP32", True), tensor("b", b, "FP32", True)]
    )
    assert_came_as(result, "output", binary=True)
    got = result.as_numpy("output")
    assert got.nbytes == 16 << 20
    assert_same(got, a + b)


def test_repository_index_load_infer_unload(client, add_wasm):
    index = client.get_model_repository_index()
    assert any(m["name"] == "add" for m in index), index
    name = "loaded_add_sync"
    config = json.dumps(
        {
            "name": name,
            "platform": "wasmrpc_wasm",
            # Which export of the multi-method add component the model runs.
            "parameters": {"export": {"string_value": "add"}},
        }
    )
    client.load_model(name, config=config, files={"file:1/model.wasm": add_wasm})
    assert client.is_model_ready(name)
    assert any(m["name"] == name for m in client.get_model_repository_index())
    result = client.infer(name, add_inputs(True, True))
    assert_same(result.as_numpy("output"), A + B)
    client.unload_model(name)
    assert not client.is_model_ready(name)
    with pytest.raises(InferenceServerException) as e:
        client.infer(name, add_inputs(False, False))
    assert e.value.status() == "404"


def test_unknown_model_is_the_servers_404(client, url):
    with pytest.raises(InferenceServerException) as e:
        client.infer("no_such_model", add_inputs(False, False))
    status, text = server_error(url, "POST", "/v2/models/no_such_model/infer", b'{"inputs": []}')
    assert e.value.status() == str(status) == "404"
    assert e.value.message() == text
    assert "no_such_model" in str(e.value)
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("no_such_model")
    assert e.value.status() == "404"
    assert "no_such_model" in e.value.message()


# The protocol's routes that this server does not serve still answer in the protocol's error
# shape: tritonclient cannot even print an InferenceServerException whose message is not a string.
def test_routes_the_server_lacks_fail_in_the_protocols_shape(client):
    with pytest.raises(InferenceServerException) as e:
        client.get_trace_settings("add")
    assert isinstance(e.value.message(), str), e.value.message()
    assert e.value.status() in ("400", "404", "501")
    str(e.value)


def test_statistics_count_the_calls_of_a_model(client):
    before = client.get_inference_statistics("add")["model_stats"][0]["inference_count"]
    client.infer("add", add_inputs(True, True))
    after = client.get_inference_statistics("add")["model_stats"][0]
    assert after["inference_count"] == before + 1, after
    assert after["name"] == "add"


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_bad_inputs_are_400_with_the_servers_reason(client, binary):
    def refused(inputs, *fragments):
        with pytest.raises(InferenceServerException) as e:
            client.infer("add", inputs)
        assert e.value.status() == "400", e.value
        for fragment in fragments:
            assert fragment in e.value.message(), e.value.message()

    floats = A.astype(np.float32)
    # Wrong datatype: FP32 for an INT32 input.
    refused([tensor("a", floats, "FP32", binary), tensor("b", B, "INT32", binary)], "`a`")
    # Wrong shape: a declared shape that does not match the data sent.
    short = tensor("a", A, "INT32", binary)
    short.set_shape([3, 3])
    refused([short, tensor("b", B, "INT32", binary)], "`a`")
    # Shapes the model cannot add (the guest's own invalid-argument).
    refused([tensor("a", A, "INT32", binary), tensor("b", B[:1], "INT32", binary)], "shape")
    # A missing input.
    refused([tensor("a", A, "INT32", binary)], "missing input `b`")


def test_binary_tensor_data_is_much_faster_than_json(authority):
    # The short version of bench_binary_vs_json.py (docs/benchmarks.md): 4 MiB tensors against a
    # debug build, with a bound far under the release figure.
    from bench_binary_vs_json import measure

    json_s, binary_s = measure(authority, mib=4, rounds=3)
    print(f"4 MiB float32: JSON {json_s * 1e3:.0f} ms, binary {binary_s * 1e3:.0f} ms")
    assert json_s > 5 * binary_s, (json_s, binary_s)
