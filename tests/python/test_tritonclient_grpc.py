"""tritonclient.grpc (grpcio), default options, against the real server's gRPC service on its
main port: `inference.GRPCInferenceService`, the same models and answers as the HTTP v2 routes."""

import json
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
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


def inputs(module=grpcclient):
    return add_inputs(module=module)


def refused(call, *args, **kwargs):
    """The InferenceServerException `call(*args, **kwargs)` raises."""
    with pytest.raises(InferenceServerException) as e:
        call(*args, **kwargs)
    return e.value


def test_health_and_server_metadata(grpc_client):
    assert grpc_client.is_server_live()
    assert grpc_client.is_server_ready()
    meta = grpc_client.get_server_metadata(as_json=True)
    assert meta["name"] == "wasmrpc"
    assert isinstance(meta["version"], str)
    assert "model_repository" in meta["extensions"], meta


def test_a_missing_model_is_not_ready(grpc_client):
    assert not grpc_client.is_model_ready("no_such_model")


def test_model_ready_metadata_and_config(grpc_client):
    assert grpc_client.is_model_ready("add")
    assert grpc_client.is_model_ready("add", model_version="1")
    meta = grpc_client.get_model_metadata("add", as_json=True)
    assert (meta["name"], meta["platform"]) == ("add", "wasmrpc_wasm")
    assert [(t["name"], t["datatype"]) for t in meta["inputs"]] == [("a", "INT32"), ("b", "INT32")]
    assert [(t["name"], t["datatype"]) for t in meta["outputs"]] == [("output", "INT32")]
    assert grpc_client.get_model_metadata("add", model_version="1", as_json=True) == meta
    config = grpc_client.get_model_config("add", as_json=True)["config"]
    assert config["name"] == "add"
    assert [(t["name"], t["data_type"]) for t in config["input"]] == [
        ("a", "TYPE_INT32"),
        ("b", "TYPE_INT32"),
    ]
    assert all(t["dims"] for t in config["input"] + config["output"])
    strings = grpc_client.get_model_config("upper", as_json=True)["config"]
    assert strings["input"][0]["data_type"] == "TYPE_STRING"


def test_infer_sends_raw_contents_and_reads_raw_outputs(grpc_client):
    result = grpc_client.infer("add", inputs(), request_id="grpc-1")
    response = result.get_response()
    assert (response.id, response.model_name) == ("grpc-1", "add")
    assert len(response.raw_output_contents) == 1, "outputs come as raw_output_contents"
    assert result.get_output("output").datatype == "INT32"
    assert_same(result.as_numpy("output"), A + B)
    asked = grpc_client.infer("add", inputs(), outputs=[grpcclient.InferRequestedOutput("output")])
    assert_same(asked.as_numpy("output"), A + B)


@pytest.mark.parametrize(
    "model, datatype, a, b", ADD_CASES + [BF16_CASE], ids=[c[1] for c in ADD_CASES + [BF16_CASE]]
)
def test_add_every_numeric_datatype(grpc_client, model, datatype, a, b):
    result = grpc_client.infer(
        model, [tensor("a", a, datatype, module=grpcclient), tensor("b", b, datatype, module=grpcclient)]
    )
    assert result.get_output("output").datatype == datatype
    with np.errstate(over="ignore"):
        assert_same(result.as_numpy("output"), a + b)


def test_bytes_tensors_through_upper_and_length(grpc_client):
    s = [tensor("s", WORDS, "BYTES", module=grpcclient)]
    got = grpc_client.infer("upper", s).as_numpy("output")
    assert got.shape == (2, 2)
    assert as_text(got) == UPPER_WORDS
    assert_same(grpc_client.infer("length", s).as_numpy("output"), WORD_LENGTHS)


def test_a_16_mib_float32_tensor_round_trips(grpc_client):
    a, b = sixteen_mib_pair()
    result = grpc_client.infer(
        "add_float32",
        [tensor("a", a, "FP32", module=grpcclient), tensor("b", b, "FP32", module=grpcclient)],
    )
    got = result.as_numpy("output")
    assert got.nbytes == 16 << 20
    assert_same(got, a + b)


def test_repository_index_load_infer_unload(grpc_client, add_wasm):
    index = grpc_client.get_model_repository_index(as_json=True)["models"]
    assert any(m["name"] == "add" for m in index), index
    name = "loaded_add_grpc"
    config = json.dumps(
        {"name": name, "platform": "wasmrpc_wasm", "parameters": {"export": {"string_value": "add"}}}
    )
    grpc_client.load_model(name, config=config, files={"file:1/model.wasm": add_wasm})
    assert grpc_client.is_model_ready(name)
    index = grpc_client.get_model_repository_index(as_json=True)["models"]
    assert any(m["name"] == name for m in index), index
    assert_same(grpc_client.infer(name, inputs()).as_numpy("output"), A + B)
    grpc_client.unload_model(name)
    assert not grpc_client.is_model_ready(name)
    assert grpc_code(refused(grpc_client.infer, name, inputs())) == "NOT_FOUND"


def test_statistics_count_the_calls_of_a_model(grpc_client):
    def stats():
        return grpc_client.get_inference_statistics("add", as_json=True)["model_stats"][0]

    before = int(stats().get("inference_count", 0))
    grpc_client.infer("add", inputs())
    after = stats()
    assert after["name"] == "add"
    assert int(after["inference_count"]) == before + 1, after


def test_a_missing_model_is_not_found_with_the_http_routes_text(grpc_client, url):
    e = refused(grpc_client.infer, "no_such_model", inputs())
    _, text = server_error(url, "POST", "/v2/models/no_such_model/infer", b'{"inputs": []}')
    assert grpc_code(e) == "NOT_FOUND"
    assert e.message() == text
    e = refused(grpc_client.get_model_metadata, "no_such_model")
    assert grpc_code(e) == "NOT_FOUND" and "no_such_model" in e.message()


def test_bad_inputs_are_invalid_argument_with_the_servers_reason(grpc_client):
    def bad(tensors, fragment):
        e = refused(grpc_client.infer, "add", tensors)
        assert grpc_code(e) == "INVALID_ARGUMENT", e
        assert fragment in e.message(), e.message()

    b = tensor("b", B, "INT32", module=grpcclient)
    bad([tensor("a", A.astype(np.float32), "FP32", module=grpcclient), b], "`a`")
    bad([tensor("a", A, "INT32", module=grpcclient), tensor("b", B[:1], "INT32", module=grpcclient)], "shape")
    bad([tensor("a", A, "INT32", module=grpcclient)], "missing input `b`")


def test_an_infinite_loop_past_a_half_second_timeout_is_deadline_exceeded_and_frees_its_slot(keyed):
    # Tenant a has one call slot: the call after the deadline runs only if the loop's was freed.
    with grpcclient.InferenceServerClient(keyed.authority) as c:
        x = np.zeros(1, np.float32)
        started = time.monotonic()
        e = refused(
            c.infer,
            "spin",
            [tensor("x", x, "FP32", module=grpcclient)],
            client_timeout=0.5,
            headers=bearer(keyed.key_a),
        )
        took = time.monotonic() - started
        assert grpc_code(e) == "DEADLINE_EXCEEDED", e
        assert took < 3, took
        result = c.infer("add", inputs(), headers=bearer(keyed.key_a))
        assert_same(result.as_numpy("output"), A + B)


def test_no_key_or_a_bad_key_is_unauthenticated(keyed):
    with grpcclient.InferenceServerClient(keyed.authority) as c:
        for headers in (None, bearer("wrpc_0000000000000000_not-a-key"), {"authorization": "Basic x"}):
            e = refused(c.infer, "add", inputs(), headers=headers)
            assert grpc_code(e) == "UNAUTHENTICATED", (headers, e)
            e = refused(c.get_model_metadata, "add", headers=headers)
            assert grpc_code(e) == "UNAUTHENTICATED", (headers, e)
        assert c.get_model_metadata("add", headers=bearer(keyed.key_a)).name == "add"


def test_another_tenants_model_is_exactly_a_missing_one(keyed, add_wasm):
    name = "only_in_a_grpc"
    register(keyed.url, keyed.key_a, name, add_wasm, "add")
    with grpcclient.InferenceServerClient(keyed.authority) as c:
        as_a, as_b = bearer(keyed.key_a), bearer(keyed.key_b)
        assert c.is_model_ready(name, headers=as_a)

        def seen_by_b():
            infer = refused(c.infer, name, inputs(), headers=as_b)
            metadata = refused(c.get_model_metadata, name, headers=as_b)
            config = refused(c.get_model_config, name, headers=as_b)
            ready = c.is_model_ready(name, headers=as_b)
            return [(grpc_code(e), e.message()) for e in (infer, metadata, config)] + [ready]

        while_in_a = seen_by_b()
        unregister(keyed.url, keyed.key_a, name)
        missing = seen_by_b()
    assert while_in_a == missing
    assert while_in_a[0][0] == "NOT_FOUND"
