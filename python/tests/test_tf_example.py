"""TensorFlow's documented `tf.distribute.experimental.rpc.Client` example, line for line, with
`import tensorflow as tf` changed to wasmrpc and numpy; the TF line is above each of ours."""

import numpy as np

import wasmrpc
from wasmrpc import rpc


def test_tensorflows_documented_example_runs_line_for_line(guest, free_port):
    # port = portpicker.pick_unused_port()
    port = free_port
    # address = "localhost:{}".format(port)
    address = "localhost:{}".format(port)
    # server = tf.distribute.experimental.rpc.Server.create("grpc", address)
    server = rpc.Server.create("grpc", address)
    # server.register("addition", remote_fn)  (remote_fn: a tf.function adding two int32s)
    server.register("addition", guest("example-add"), export="add")
    # server.start()
    server.start()

    # client = tf.distribute.experimental.rpc.Client.create("grpc",
    #       address=address, name="test_client")
    client = rpc.Client.create("grpc", address=address, name="test_client")

    # a = tf.constant(2, dtype=tf.int32)
    a = np.array(2, dtype=np.int32)
    # b = tf.constant(3, dtype=tf.int32)
    b = np.array(3, dtype=np.int32)

    # result = client.call(
    #     args=[a, b],
    #     method_name="addition",
    #     output_specs=tf.TensorSpec((), tf.int32))
    result = client.call(
        args=[a, b],
        method_name="addition",
        output_specs=wasmrpc.TensorSpec((), np.int32))

    # if result.is_ok():
    #   value = result.get_value()
    assert result.is_ok()
    value = result.get_value()
    assert value == 5 and value.dtype == np.int32 and value.shape == ()

    # result = client.addition(a, b)
    result = client.addition(a, b)

    # if result.is_ok():
    #   value = result.get_value()
    assert result.is_ok()
    value = result.get_value()
    assert value == 5

    # value = client.addition_blocking(a, b)
    value = client.addition_blocking(a, b)
    assert value == 5 and value.dtype == np.int32

    # Not in TF's example: the server stops.
    server.shutdown()
    server.join()


def test_the_error_of_a_failed_result_is_its_code_and_message(client):
    result = client.call(
        args=[np.float32(2), np.float32(3)],
        method_name="addition",
        output_specs=wasmrpc.TensorSpec((), np.int32),
    )
    assert not result.is_ok()
    code, message = result.get_error()
    assert code == wasmrpc.Code.INVALID_ARGUMENT == 3
    assert "expected int32, got float32" in message
    try:
        result.get_value()
    except wasmrpc.InvalidArgumentError as e:
        assert e.code == wasmrpc.Code.INVALID_ARGUMENT
        assert e.message == message
    else:
        raise AssertionError("get_value() of a failed call raises")


def test_a_successful_result_has_the_ok_code_and_no_message(client):
    result = client.addition(np.int32(2), np.int32(3))
    assert result.get_error() == (wasmrpc.Code.OK, "")


def test_python_numbers_take_the_dtype_of_the_signature(client):
    assert client.addition_blocking(2, 3).dtype == np.int32
    assert client.add_float32_blocking([0.5, 1], [1, 2]).tolist() == [1.5, 3.0]


def test_a_list_of_output_specs_gives_a_list(client):
    value = client.call("addition", [np.int32(1), np.int32(2)], [wasmrpc.TensorSpec((), "int32")]).get_value()
    assert isinstance(value, list) and value[0] == 3


def test_output_specs_that_do_not_fit_are_an_invalid_argument(client):
    result = client.call("addition", [np.int32(1), np.int32(2)], wasmrpc.TensorSpec((), np.float32))
    assert result.get_error()[0] == wasmrpc.Code.INVALID_ARGUMENT


def test_the_client_lists_the_servers_methods_with_their_signatures(client):
    methods = {m["name"]: m for m in client.list_registered_methods()}
    inputs = methods["addition"]["signature"]["inputs"]
    assert [(i["name"], i["dtype"]) for i in inputs] == [("a", "int32"), ("b", "int32")]
    assert callable(client.addition) and callable(client.addition_blocking)


def test_a_method_registered_after_creation_is_found_on_first_use(client, guest):
    other = rpc.Client.create("http", client.address, name="other")
    other.register("late_addition", guest("example-add"), export="add")
    try:
        assert client.late_addition_blocking(np.int32(1), np.int32(1)) == 2
    finally:
        other.delete("late_addition")
