// Every dtype both ways through `call`: wire bytes in, the documented JavaScript array out to the
// function, and the function's array back to the same little-endian wire bytes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fn, exportMethods } from "../src/index.js";
import { decode, encode } from "../src/dtypes.js";
import { witTensor, leBytes } from "./helpers.js";

// An identity method on `dtype` that records what the function saw.
function echo(dtype) {
  const seen = [];
  const method = exportMethods({ echo: fn({ args: { x: dtype }, returns: dtype }, (x) => (seen.push(x), x)) });
  return { method, seen };
}

const CASES = [
  // dtype, WIT case, JS class, values, their wire bytes
  ["bool", "bool", Uint8Array, [1, 0, 1], [1, 0, 1]],
  ["uint8", "u8", Uint8Array, [0, 255], [0, 255]],
  ["uint16", "u16", Uint16Array, [1, 0xfffe], [1, 0, 0xfe, 0xff]],
  ["uint32", "u32", Uint32Array, [1, 0xfffffffe], [1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]],
  ["uint64", "u64", BigUint64Array, [1n, 2n ** 64n - 2n], [1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
  ["int8", "i8", Int8Array, [1, -2], [1, 0xfe]],
  ["int16", "i16", Int16Array, [1, -2], [1, 0, 0xfe, 0xff]],
  ["int32", "i32", Int32Array, [1, -2], [1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]],
  ["int64", "i64", BigInt64Array, [1n, -2n], [1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
  // float16: 1.0 = 0x3c00, -2.0 = 0xc000, 65504 (max) = 0x7bff, 2^-24 (smallest subnormal) = 0x0001.
  ["float16", "f16", Float32Array, [1, -2, 65504, 2 ** -24], [0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00]],
  // bfloat16: 1.0 = 0x3f80, -2.0 = 0xc000.
  ["bfloat16", "bf16", Float32Array, [1, -2], [0x80, 0x3f, 0x00, 0xc0]],
  ["float32", "f32", Float32Array, [1, -2.5], [0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0]],
  ["float64", "f64", Float64Array, [1, -2.5], [0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0x04, 0xc0]],
  ["string", "bytes", Array, ["hé", ""], [3, 0, 0, 0, 0x68, 0xc3, 0xa9, 0, 0, 0, 0]],
  ["bytes", "bytes", Array, [Uint8Array.of(0xff, 0), new Uint8Array()], [2, 0, 0, 0, 0xff, 0, 0, 0, 0, 0]],
];

for (const [dtype, wit, Class, values, bytes] of CASES) {
  test(`${dtype}: wire bytes arrive as ${Class.name} and go back unchanged`, () => {
    const { method, seen } = echo(dtype);
    const result = method.call("echo", [witTensor(wit, [values.length], bytes)]);
    if (result.tag !== "ok") assert.fail(JSON.stringify(result.val));
    const [x] = seen;
    assert.equal(x.dtype, dtype);
    assert.deepEqual(x.shape, [values.length]);
    assert.ok(x.data instanceof Class, `${dtype} arrived as ${x.data.constructor.name}`);
    assert.deepEqual(Array.from(x.data), values);
    const [out] = result.val;
    assert.equal(out.dtype, wit);
    assert.deepEqual(Array.from(out.shape), [BigInt(values.length)]);
    assert.ok(out.shape instanceof BigUint64Array);
    assert.ok(out.data instanceof Uint8Array);
    assert.deepEqual(Array.from(out.data), bytes);
  });
}

test("plain Arrays are accepted as output data and converted to the dtype", () => {
  const cases = [
    ["float32", [1.5, -2], [0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0]],
    ["int64", [1, -2], [1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
    ["bool", [true, false], [1, 0]],
    ["float16", [1, -2], [0x00, 0x3c, 0x00, 0xc0]],
  ];
  for (const [dtype, data, bytes] of cases) {
    const method = exportMethods({ m: fn({ returns: dtype }, () => ({ data, shape: [2] })) });
    const result = method.call("m", []);
    if (result.tag !== "ok") assert.fail(`${dtype}: ${JSON.stringify(result.val)}`);
    assert.deepEqual(Array.from(result.val[0].data), bytes, dtype);
  }
});

test("a typed array of another class is refused as an output (internal), not silently converted", () => {
  const method = exportMethods({ m: fn({ returns: "float32" }, () => ({ data: new Float64Array(2), shape: [2] })) });
  assert.deepEqual(method.call("m", []), {
    tag: "err",
    val: { tag: "internal", val: "method m returned output `output`: float32 data must be a Float32Array or an Array, got Float64Array" },
  });
});

test("float16 and bfloat16 round to nearest, ties to even, and keep infinities and NaN", () => {
  const f16 = (v) => new DataView(encode("float16", [v]).buffer).getUint16(0, true);
  assert.equal(f16(0.1), 0x2e66);
  assert.equal(f16(65520), 0x7c00); // past the largest float16: infinity
  assert.equal(f16(-Infinity), 0xfc00);
  assert.equal(f16(1 + 2 ** -11), 0x3c00); // a tie: to the even mantissa
  assert.equal(f16(1 + 3 * 2 ** -11), 0x3c02);
  assert.equal(f16(2 ** -25), 0); // half the smallest subnormal: a tie, to even (zero)
  assert.ok(Number.isNaN(decode("float16", Uint8Array.from(encode("float16", [NaN])), 1)[0]));
  const bf16 = (v) => new DataView(encode("bfloat16", [v]).buffer).getUint16(0, true);
  assert.equal(bf16(Math.PI), 0x4049);
  assert.equal(bf16(1 + 2 ** -8), 0x3f80); // a tie: to even
  assert.equal(bf16(1 + 3 * 2 ** -8), 0x3f82);
  assert.ok(Number.isNaN(decode("bfloat16", Uint8Array.from(encode("bfloat16", [NaN])), 1)[0]));
});

test("big-endian engines take the DataView path and produce the same little-endian bytes", () => {
  for (const [dtype, , , values, bytes] of CASES) {
    if (dtype === "string" || dtype === "bytes") continue;
    const data = decode(dtype, Uint8Array.from(bytes), values.length, { littleEndian: false });
    assert.deepEqual(Array.from(data), values, dtype);
    assert.deepEqual(Array.from(encode(dtype, data, { littleEndian: false })), bytes, dtype);
  }
});

test("unaligned wire bytes are copied before they are viewed", () => {
  const buffer = new Uint8Array(9);
  buffer.set([0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0], 1);
  assert.deepEqual(Array.from(decode("float32", buffer.subarray(1), 2)), [1, -2.5]);
});

test("output bytes of a subarray are those of the subarray only", () => {
  const whole = Int32Array.of(7, 1, -2, 9);
  assert.deepEqual(Array.from(encode("int32", whole.subarray(1, 3))), leBytes(Int32Array.of(1, -2)));
});
