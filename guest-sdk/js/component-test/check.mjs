// Calls components built from examples/js/matmul and examples/js/echo, transpiled by jco, from node
// as the host would (WIT values as jco passes them), and checks their answers. Run by run.sh:
//   node check.mjs <matmul module> <echo module>
// Exits non-zero on the first wrong answer.
import assert from "node:assert/strict";

const [matmulPath, echoPath] = process.argv.slice(2).map((p) => new URL(p, `file://${process.cwd()}/`).href);
const { method: matmul } = await import(matmulPath);
const { method: echo } = await import(echoPath);

const tensor = (dtype, shape, bytes) => ({ dtype, shape: BigUint64Array.from(shape, BigInt), data: Uint8Array.from(bytes) });
const f32 = (shape, values) => tensor("f32", shape, new Uint8Array(Float32Array.from(values).buffer));
// jco throws a ComponentError whose `payload` is the WIT error; anything else is a trap.
const errorOf = (f) => {
  try {
    f();
  } catch (e) {
    if (e.payload) return e.payload;
    throw e;
  }
  assert.fail("expected an error");
};

// matmul: the Rust twin's signature and answers.
const [sig] = matmul.signatures();
assert.deepEqual(
  { name: sig.name, inputs: sig.inputs.map((s) => [s.name, s.dtype, s.shape]), outputs: sig.outputs.map((s) => [s.name, s.dtype, s.shape]) },
  { name: "matmul", inputs: [["a", "f32", [undefined, undefined]], ["b", "f32", [undefined, undefined]]], outputs: [["output", "f32", [undefined, undefined]]] },
);
let t0 = performance.now();
const [product] = matmul.call("matmul", [f32([2, 3], [1, 2, 3, 4, 5, 6]), f32([3, 2], [7, 8, 9, 10, 11, 12])]);
const first = performance.now() - t0;
assert.deepEqual(Array.from(product.shape), [2n, 2n]);
assert.deepEqual(Array.from(new Float32Array(product.data.slice().buffer)), [58, 64, 139, 154]);
assert.deepEqual(errorOf(() => matmul.call("matmul", [f32([2, 3], [1, 2, 3, 4, 5, 6]), f32([2, 2], [1, 2, 3, 4])])), {
  tag: "invalid-argument",
  val: "inner dimensions differ: a has shape [2, 3], b has shape [2, 2]",
});
assert.deepEqual(errorOf(() => matmul.call("matmul", [f32([3], [1, 2, 3]), f32([3, 1], [1, 2, 3])])), {
  tag: "invalid-argument",
  val: "argument `a`: expected shape [_, _], got [3]",
});
assert.deepEqual(errorOf(() => matmul.call("nope", [])), { tag: "not-found", val: "no method `nope` in this component; it has: matmul" });
// 1,000 float32 elements a side ([1, 1000] × [1000, 1]), 200 calls: the in-process cost of one call.
const a = f32([1, 1000], Array.from({ length: 1000 }, (_, i) => i % 7));
const b = f32([1000, 1], Array.from({ length: 1000 }, (_, i) => i % 3));
t0 = performance.now();
for (let i = 0; i < 200; i++) matmul.call("matmul", [a, b]);
const each = (performance.now() - t0) / 200;
console.log(`matmul: ok (first call ${first.toFixed(1)} ms, then ${each.toFixed(3)} ms a call for 1000 x 1000 elements)`);

// echo: every dtype's wire bytes come back unchanged.
const CASES = {
  bool: ["bool", [1, 0]],
  uint8: ["u8", [0, 255]],
  uint16: ["u16", [1, 0, 0xfe, 0xff]],
  uint32: ["u32", [1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]],
  uint64: ["u64", [1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
  int8: ["i8", [1, 0xfe]],
  int16: ["i16", [1, 0, 0xfe, 0xff]],
  int32: ["i32", [1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]],
  int64: ["i64", [1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
  float16: ["f16", [0x00, 0x3c, 0x00, 0xc0]],
  bfloat16: ["bf16", [0x80, 0x3f, 0x00, 0xc0]],
  float32: ["f32", [0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0]],
  float64: ["f64", [0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0x04, 0xc0]],
  string: ["bytes", [3, 0, 0, 0, 0x68, 0xc3, 0xa9, 0, 0, 0, 0]],
  bytes: ["bytes", [2, 0, 0, 0, 0xff, 0, 0, 0, 0, 0]],
};
for (const [dtype, [wit, bytes]] of Object.entries(CASES)) {
  const [out] = echo.call(`echo_${dtype}`, [tensor(wit, [2], bytes)]);
  assert.equal(out.dtype, wit, dtype);
  assert.deepEqual(Array.from(out.shape), [2n], dtype);
  assert.deepEqual(Array.from(out.data), bytes, dtype);
}
console.log(`echo: ok (${Object.keys(CASES).length} dtypes both ways)`);

// Strings: UTF-8 decoded and encoded inside the component; invalid UTF-8 refused.
const [shouted] = echo.call("shout", [tensor("bytes", [1], [3, 0, 0, 0, 0x68, 0xc3, 0xa9])]);
assert.deepEqual(Array.from(shouted.data), [3, 0, 0, 0, 0x48, 0xc3, 0x89]); // "hé" → "HÉ"
assert.deepEqual(errorOf(() => echo.call("shout", [tensor("bytes", [1], [2, 0, 0, 0, 0xc3, 0x28])])), {
  tag: "invalid-argument",
  val: 'argument `text`: element 0 of 1 is not valid UTF-8; declare the dtype "bytes" to take any bytes',
});
assert.deepEqual(errorOf(() => echo.call("echo_bool", [tensor("bool", [1], [2])])), {
  tag: "invalid-argument",
  val: "argument `x`: element 0 is 2; a bool must be 0 or 1",
});
console.log("strings: ok");

// Thrown errors map onto the documented codes inside the component too.
const EXPECTED = {
  sdk_out_of_range: { tag: "out-of-range", val: "index 7 of 4" },
  type_error: { tag: "invalid-argument", val: "wants a matrix" },
  range_error: { tag: "invalid-argument", val: "k too large" },
  plain_error: { tag: "internal", val: "method fail_plain_error: Error: a bug" },
  string: { tag: "internal", val: "method fail_string: a method threw a non-Error value: not an Error" },
};
for (const [name, expected] of Object.entries(EXPECTED)) assert.deepEqual(errorOf(() => echo.call(`fail_${name}`, [])), expected, name);
console.log(`errors: ok (${Object.keys(EXPECTED).length} kinds)`);
