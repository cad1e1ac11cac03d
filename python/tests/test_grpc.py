"""The rpc layer ``grpc``: every call a gRPC ModelInfer of the Open Inference Protocol, with the
same values and the same exceptions as over ``http``."""

import json
import time
import urllib.request

import numpy as np
import pytest

import wasmrpc
from wasmrpc import rpc
from test_tensors import CASES, np_dtype

SPIN_ARG = np.zeros(1, dtype=np.float32)


@pytest.fixture
def grpc_client(address):
    return rpc.Client.create("grpc", address, name="pytest-grpc", timeout_in_ms=30000)


def test_grpc_is_a_layer_of_its_own_and_the_address_says_so(grpc_client, address):
    assert rpc.RPC_LAYERS == ("http", "https", "grpc", "grpcs")
    assert grpc_client.address == f"grpc://{address}"
    assert rpc.Client.create("http", address).address == f"http://{address}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_dtype_gives_the_same_bits_over_grpc_and_http(grpc_client, client, name):
    a_values, b_values, _ = CASES[name]
    dtype = np_dtype(name)
    a, b = np.array(a_values, dtype=dtype), np.array(b_values, dtype=dtype)
    over_grpc = grpc_client.call(f"add_{name}", [a, b]).get_value()
    over_http = client.call(f"add_{name}", [a, b]).get_value()
    assert over_grpc.dtype == over_http.dtype == dtype
    assert over_grpc.tobytes() == over_http.tobytes()


def test_strings_and_scalars_travel_over_grpc(grpc_client):
    words = np.array(["hello", "wörld", ""], dtype=object)
    assert list(grpc_client.upper_blocking(words)) == [b"HELLO", "WÖRLD".encode(), b""]
    assert grpc_client.addition_blocking(np.int32(2), np.int32(3)) == 5
    assert grpc_client.addition_blocking(np.int32(2), np.int32(3)).shape == ()


def test_a_16_mib_float32_array_round_trips_over_grpc(grpc_client):
    a = np.arange(4 << 20, dtype=np.float32)
    got = grpc_client.add_float32_blocking(a, a)
    assert got.nbytes == 16 << 20
    assert np.array_equal(got, a + a)


def test_errors_over_grpc_are_the_same_exceptions(grpc_client):
    with pytest.raises(wasmrpc.NotFoundError, match="addition"):
        grpc_client.call("no_such_method", [SPIN_ARG]).get_value()
    with pytest.raises(wasmrpc.InvalidArgumentError, match="takes 2 argument"):
        grpc_client.addition_blocking(np.int32(1))
    with pytest.raises(wasmrpc.InternalError, match="unreachable"):
        grpc_client.unreachable_blocking(SPIN_ARG)
    # Past the signature check of the client: the server's own refusal.
    with pytest.raises(wasmrpc.InvalidArgumentError):
        grpc_client.call(
            "addition", [np.zeros(2, np.int32), np.zeros(3, np.int32)]
        ).get_value()


def test_a_grpc_call_past_its_timeout_is_deadline_exceeded_and_the_server_goes_on(grpc_client):
    started = time.monotonic()
    result = grpc_client.call("spin", [SPIN_ARG], timeout_in_ms=300)
    assert result.get_error()[0] == wasmrpc.Code.DEADLINE_EXCEEDED
    with pytest.raises(wasmrpc.DeadlineExceededError):
        result.get_value()
    assert time.monotonic() - started < 5
    assert grpc_client.addition_blocking(np.int32(1), np.int32(1)) == 2


def test_json_is_for_the_http_layers(address):
    with pytest.raises(wasmrpc.InvalidArgumentError, match="JSON encoding"):
        rpc.Client.create("grpc", address, encoding="json")


def test_a_tenants_key_goes_as_grpc_metadata(tmp_path, guest):
    from conftest import ServerProcess

    server = ServerProcess("--admin-key-file", str(tmp_path / "admin.key"))
    try:
        admin_key = (tmp_path / "admin.key").read_text().strip()
        request = urllib.request.Request(
            server.url + "/v1/tenants",
            data=json.dumps({"name": "team-a"}).encode(),
            headers={"Authorization": f"Bearer {admin_key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as response:
            key = json.load(response)["key"]
        team = rpc.Client.create("grpc", server.address, name="team-a", key=key, timeout_in_ms=5000)
        team.register("addition", guest("example-add"), export="add")
        assert team.addition_blocking(np.int32(2), np.int32(3)) == 5
        # A key revoked meanwhile: the gRPC call itself is refused.
        key_id = key.split("_")[1]
        revoke = urllib.request.Request(
            f"{server.url}/v1/tenants/team-a/keys/{key_id}",
            method="DELETE",
            headers={"Authorization": f"Bearer {admin_key}"},
        )
        urllib.request.urlopen(revoke).close()
        with pytest.raises(wasmrpc.UnauthenticatedError):
            team.addition_blocking(np.int32(2), np.int32(3))
    finally:
        server.stop()
