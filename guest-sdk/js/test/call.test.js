// `call`: dispatch by name, argument checks (count, dtype, data, declared shape), output checks, and
// how what a function throws becomes a WIT error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fn, exportMethods, SdkError, toWitError } from "../src/index.js";
import { witTensor } from "./helpers.js";

const f32 = (shape, values) => witTensor("f32", shape, new Uint8Array(Float32Array.from(values).buffer));
const err = (tag, val) => ({ tag: "err", val: { tag, val } });

// a (float32 [_, 2]) plus a scalar b, returning float32 [_, 2].
const method = exportMethods({
  shift: fn(
    { args: { a: ["float32", [-1, 2]], b: ["float32", []] }, returns: { out: ["float32", [-1, 2]] } },
    (a, b) => ({ data: a.data.map((v) => v + b.data[0]), shape: a.shape }),
  ),
  pair: fn({ returns: { x: "int8", y: "int8" } }, () => [{ data: [1] }, { data: [2, 3] }]),
  named: fn({ returns: { x: "int8", y: "int8" } }, () => ({ y: { data: [2] }, x: { data: [1] } })),
});

test("dispatches by name and answers", () => {
  const result = method.call("shift", [f32([2, 2], [1, 2, 3, 4]), f32([], [10])]);
  assert.equal(result.tag, "ok");
  const [out] = result.val;
  assert.deepEqual(Array.from(new Float32Array(out.data.buffer, out.data.byteOffset, 4)), [11, 12, 13, 14]);
  assert.deepEqual(Array.from(out.shape), [2n, 2n]);
});

test("an unknown method is not-found, listing the methods", () => {
  assert.deepEqual(method.call("nope", []), err("not-found", "no method `nope` in this component; it has: shift, pair, named"));
});

test("several outputs come back in declared order, from an Array or an object", () => {
  for (const name of ["pair", "named"]) {
    const result = method.call(name, []);
    assert.equal(result.tag, "ok", name);
    assert.deepEqual(result.val.map((t) => Array.from(t.data)), name === "pair" ? [[1], [2, 3]] : [[1], [2]]);
  }
});

test("arguments are checked before the function runs: count, dtype, shape, data", () => {
  const good = f32([1, 2], [1, 2]);
  const scalar = f32([], [1]);
  const cases = [
    [[good], "method shift takes 2 arguments, got 1"],
    [[witTensor("i32", [1, 2], new Uint8Array(8)), scalar], "argument `a`: expected float32, got int32"],
    [[f32([2], [1, 2]), scalar], "argument `a`: expected shape [_, 2], got [2]"],
    [[f32([1, 3], [1, 2, 3]), scalar], "argument `a`: expected shape [_, 2], got [1, 3]"],
    [[good, f32([1], [1])], "argument `b`: expected shape [], got [1]"],
    [[witTensor("f32", [2, 2], new Uint8Array(8)), scalar], "argument `a`: 4 elements need 16 bytes of data, got 8"],
    [[witTensor("f32", [2 ** 40, 2 ** 40, 2], []), scalar], "argument `a`: shape [1099511627776, 1099511627776, 2] has too many elements"],
  ];
  for (const [args, message] of cases) assert.deepEqual(method.call("shift", args), err("invalid-argument", message));
});

test("bad element data is invalid-argument naming the argument", () => {
  const m = exportMethods({
    b: fn({ args: { flags: "bool" }, returns: "bool" }, (x) => x),
    s: fn({ args: { text: "string" }, returns: "string" }, (x) => x),
  });
  assert.deepEqual(m.call("b", [witTensor("bool", [2], [1, 2])]), err("invalid-argument", "argument `flags`: element 1 is 2; a bool must be 0 or 1"));
  assert.deepEqual(
    m.call("s", [witTensor("bytes", [1], [2, 0, 0, 0, 0xc3, 0x28])]),
    err("invalid-argument", 'argument `text`: element 0 of 1 is not valid UTF-8; declare the dtype "bytes" to take any bytes'),
  );
  assert.deepEqual(
    m.call("s", [witTensor("bytes", [1], [9, 0, 0, 0, 0x61])]),
    err("invalid-argument", "argument `text`: element 0 of 1: its length 9 runs past the end of the data"),
  );
  assert.deepEqual(
    m.call("s", [witTensor("bytes", [1], [1, 0, 0, 0, 0x61, 0x62])]),
    err("invalid-argument", "argument `text`: 1 bytes of data left after the last of 1 elements"),
  );
  assert.deepEqual(
    m.call("s", [witTensor("bytes", [2], [0, 0, 0, 0])]),
    err("invalid-argument", "argument `text`: 2 elements need at least 8 bytes of data, got 4"),
  );
});

test("outputs are checked against their declaration: a mismatch is internal", () => {
  const returning = (decl, value) => exportMethods({ m: fn({ returns: decl }, () => value) }).call("m", []);
  assert.deepEqual(
    returning(["float32", [-1, 2]], { data: new Float32Array(3), shape: [3] }),
    err("internal", "method m returned output `output` of shape [3], but declares [_, 2]"),
  );
  assert.deepEqual(
    returning("float32", { data: new Float32Array(3), shape: [2, 2] }),
    err("internal", "method m returned output `output`: shape [2, 2] holds 4 elements, got 3"),
  );
  assert.deepEqual(returning("float32", new Float32Array(1)), err("internal", "method m returned output `output` as Float32Array; return a tensor { data, shape }"));
  assert.deepEqual(returning("float32", { dtype: "int32", data: [1] }), err("internal", "method m returned output `output` of dtype int32, but declares float32"));
  assert.deepEqual(
    exportMethods({ m: fn({ returns: { x: "int8", y: "int8" } }, () => [{ data: [1] }]) }).call("m", []),
    err("internal", "method m returned 1 outputs, but declares 2"),
  );
  // A left-out shape is 1-D; a scalar is shape [].
  assert.deepEqual(Array.from(returning(["int8", [-1]], { data: [1, 2] }).val[0].shape), [2n]);
  assert.deepEqual(Array.from(returning(["int8", []], { data: [7], shape: [] }).val[0].shape), []);
});

test("an output's shape may be any array-like or iterable of integers, and arrives as u64s", () => {
  const shapes = [[2, 1], new Uint32Array([2, 1]), BigUint64Array.from([2n, 1n]), new Set([2, 1]), (function* () { yield 2; yield 1; })()];
  for (const shape of shapes) {
    const m = exportMethods({ f: fn({ returns: ["int8", [2, 1]] }, () => ({ data: [1, 2], shape })) });
    const result = m.call("f", []);
    assert.equal(result.tag, "ok", String(shape));
    assert.deepEqual(Array.from(result.val[0].shape), [2n, 1n]);
  }
  const bad = exportMethods({ f: fn({ returns: "int8" }, () => ({ data: [1], shape: [1.5] })) });
  assert.deepEqual(bad.call("f", []), err("internal", "method f returned output `output` with shape [1.5]; dimensions are integers ≥ 0"));
});

test("an async method's result is its promise's, encoded and checked as a synchronous one's", async () => {
  const m = exportMethods({
    ok: fn({ returns: "int8" }, async () => ({ data: [1] })),
    rejects: fn({ returns: "int8" }, async () => { throw new SdkError("not-found", "no row"); }),
    wrong: fn({ returns: ["int8", [2]] }, async () => ({ data: [1, 2, 3] })),
  });
  const ok = await m.call("ok", []);
  assert.equal(ok.tag, "ok");
  assert.deepEqual(Array.from(ok.val[0].data), [1]);
  assert.deepEqual(await m.call("rejects", []), err("not-found", "no row"));
  assert.equal((await m.call("wrong", [])).val.tag, "internal");
  // A synchronous method still answers synchronously: no promise where none is needed.
  const sync = exportMethods({ m: fn({ returns: "int8" }, () => ({ data: [1] })) }).call("m", []);
  assert.equal(sync.tag, "ok");
});

test("thrown errors map onto WIT codes as documented", () => {
  const throwing = (value) => exportMethods({ m: fn({ returns: "int8" }, () => { throw value; }) }).call("m", []);
  assert.deepEqual(throwing(new SdkError("out-of-range", "index 7 of 4")), err("out-of-range", "index 7 of 4"));
  assert.deepEqual(throwing(new SdkError("RESOURCE_EXHAUSTED", "too big")), err("resource-exhausted", "too big"));
  assert.deepEqual(throwing(new TypeError("wants a matrix")), err("invalid-argument", "wants a matrix"));
  // SpiderMonkey's allocation failure, thrown as a bare string: the call asked for too much.
  assert.deepEqual(throwing("out of memory"), err("resource-exhausted", "method m: ran out of memory"));
  assert.deepEqual(throwing(new RangeError("k too large")), err("invalid-argument", "k too large"));
  assert.deepEqual(throwing(new Error("bug")), err("internal", "method m: Error: bug"));
  assert.deepEqual(throwing(new SyntaxError("bad")), err("internal", "method m: SyntaxError: bad"));
  assert.deepEqual(throwing("a string"), err("internal", "method m: a method threw a non-Error value: a string"));
  assert.deepEqual(throwing(Object.create(null)), err("internal", "method m: a method threw a non-Error value: [object Object]"));
});

test("every SdkError shorthand carries its code, and unknown codes are refused", () => {
  const shorthands = {
    invalidArgument: "invalid-argument", failedPrecondition: "failed-precondition", outOfRange: "out-of-range",
    unimplemented: "unimplemented", internal: "internal", resourceExhausted: "resource-exhausted", notFound: "not-found",
  };
  for (const [method, code] of Object.entries(shorthands)) {
    assert.deepEqual(toWitError(SdkError[method]("m")), { tag: code, val: "m" }, method);
  }
  assert.throws(() => new SdkError("teapot", "x"), /unknown code "teapot"/);
});
