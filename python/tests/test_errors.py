"""Errors and timeouts, each as the exception named after its canonical code."""

import os
import socket
import time

import numpy as np
import pytest

import wasmrpc
from wasmrpc import errors, rpc

SPIN_ARG = np.zeros(1, dtype=np.float32)


def test_every_code_has_its_exception_under_one_base_with_code_and_message():
    for code in wasmrpc.Code:
        if code == wasmrpc.Code.OK:
            continue
        cls = errors.exception_class(code)
        assert issubclass(cls, wasmrpc.RpcError)
        e = errors.from_code(code.name, "why")
        assert (e.code, e.message, e.error_code) == (code, "why", code)
        assert cls.__name__ == "".join(p.capitalize() for p in code.name.split("_")) + "Error"
    assert issubclass(wasmrpc.InvalidArgumentError, ValueError)
    assert issubclass(wasmrpc.DeadlineExceededError, TimeoutError)
    assert str(wasmrpc.NotFoundError("no such method")) == "NOT_FOUND: no such method"


def test_an_unsupported_rpc_layer_is_a_value_error(address):
    with pytest.raises(ValueError, match="unsupported rpc_layer 'carrier-pigeon'"):
        rpc.Client.create("carrier-pigeon", address)
    with pytest.raises(ValueError):
        rpc.Server.create("https", "127.0.0.1:0")


def test_creation_past_its_timeout_is_deadline_exceeded():
    # The kernel accepts the connection; nobody ever answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = "127.0.0.1:%d" % silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(wasmrpc.DeadlineExceededError, match="creating the client"):
            rpc.Client.create("http", address, name="t", timeout_in_ms=200)
        assert time.monotonic() - started < 5


def test_a_server_nobody_listens_on_is_unavailable(free_port):
    with pytest.raises(wasmrpc.UnavailableError):
        rpc.Client.create("http", f"127.0.0.1:{free_port}", timeout_in_ms=2000)


def test_an_unknown_method_is_not_found_listing_what_exists(client):
    result = client.call("no_such_method", [SPIN_ARG])
    code, message = result.get_error()
    assert code == wasmrpc.Code.NOT_FOUND and "addition" in message
    with pytest.raises(wasmrpc.NotFoundError):
        result.get_value()
    with pytest.raises(AttributeError, match="no_such_method"):
        client.no_such_method_blocking


def test_arguments_that_do_not_fit_the_signature_are_invalid_argument(client):
    with pytest.raises(wasmrpc.InvalidArgumentError, match="takes 2 argument"):
        client.addition_blocking(np.int32(1))
    with pytest.raises(wasmrpc.InvalidArgumentError, match="expected int32, got int64"):
        client.addition_blocking(np.int64(1), np.int64(2))


def test_a_call_past_its_timeout_is_deadline_exceeded_and_the_server_goes_on(client):
    started = time.monotonic()
    result = client.call("spin", [SPIN_ARG], timeout_in_ms=300)
    assert not result.is_ok()
    assert result.get_error()[0] == wasmrpc.Code.DEADLINE_EXCEEDED
    with pytest.raises(wasmrpc.DeadlineExceededError):
        result.get_value()
    assert time.monotonic() - started < 5
    assert client.addition_blocking(np.int32(1), np.int32(1)) == 2


def test_the_clients_default_timeout_applies_to_every_call(address):
    quick = rpc.Client.create("http", address, name="quick", timeout_in_ms=300)
    with pytest.raises(wasmrpc.DeadlineExceededError):
        quick.spin_blocking(SPIN_ARG)


def test_a_guest_trap_is_internal_with_its_reason(client):
    with pytest.raises(wasmrpc.InternalError, match="unreachable"):
        client.unreachable_blocking(SPIN_ARG)


def test_a_guest_error_keeps_its_code(client):
    with pytest.raises(wasmrpc.RpcError) as info:
        client.fail_blocking(SPIN_ARG)
    assert info.value.code != wasmrpc.Code.OK
    assert type(info.value) is errors.exception_class(info.value.code)


def test_a_tenants_key_is_sent_and_a_wrong_one_is_unauthenticated(tmp_path, guest):
    import json
    import urllib.request

    from conftest import ServerProcess

    server = ServerProcess("--admin-key-file", str(tmp_path / "admin.key"))
    try:
        with pytest.raises(wasmrpc.UnauthenticatedError):
            rpc.Client.create("http", server.address, key="wrpc_not_a_real_key", timeout_in_ms=5000)
        admin_key = (tmp_path / "admin.key").read_text().strip()
        request = urllib.request.Request(
            server.url + "/v1/tenants",
            data=json.dumps({"name": "team-a"}).encode(),
            headers={"Authorization": f"Bearer {admin_key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as response:
            key = json.load(response)["key"]
        team = rpc.Client.create("http", server.address, name="team-a", key=key, timeout_in_ms=5000)
        team.register("addition", guest("example-add"), export="add")
        assert team.addition_blocking(np.int32(2), np.int32(3)) == 5
    finally:
        server.stop()


def test_https_to_a_server_without_tls_is_unavailable(address, tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_text("not a certificate")
    with pytest.raises(wasmrpc.InvalidArgumentError, match="CA certificate"):
        rpc.Client.create("https", address, ca_cert=pem, timeout_in_ms=5000)
    with pytest.raises((wasmrpc.UnavailableError, wasmrpc.DeadlineExceededError)):
        rpc.Client.create("https", address, timeout_in_ms=5000)


def test_a_missing_method_is_an_attribute_error_even_when_the_server_is_gone(guest):
    from conftest import ServerProcess

    server = ServerProcess()
    client = rpc.Client.create("http", server.address, timeout_in_ms=2000)
    server.stop()
    assert not hasattr(client, "gone_blocking")
    with pytest.raises(wasmrpc.UnavailableError):
        client.call("gone", []).get_value()


def test_https_with_the_test_ca_trusted_calls_and_registers(guest):
    tls = os.environ.get("WASMRPC_TEST_TLS_DIR")
    if not tls:
        pytest.skip("WASMRPC_TEST_TLS_DIR is not set (tests/e2e/python_sdk.rs makes a test CA)")
    from conftest import ServerProcess

    server = ServerProcess(
        "--tls-cert", os.path.join(tls, "chain.pem"), "--tls-key", os.path.join(tls, "key.pem")
    )
    try:
        assert server.url.startswith("https://")
        client = rpc.Client.create(
            "https", server.address, name="tls", ca_cert=os.path.join(tls, "ca.pem"), timeout_in_ms=10000
        )
        client.register("addition", guest("example-add"), export="add")
        assert client.addition_blocking(np.int32(40), np.int32(2)) == 42
        with open(os.path.join(tls, "ca.pem"), "rb") as f:
            by_pem = rpc.Client.create("https", server.url, ca_cert_pem=f.read(), timeout_in_ms=10000)
        assert by_pem.call("addition", [np.int32(1), np.int32(2)]).get_value() == 3
        # Without the CA, the server's certificate is not trusted.
        with pytest.raises(wasmrpc.UnavailableError):
            rpc.Client.create("https", server.address, timeout_in_ms=5000)
    finally:
        server.stop()
