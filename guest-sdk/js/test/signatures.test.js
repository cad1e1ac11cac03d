// What `signatures()` reports for a declaration: names, WIT dtypes, shapes, doc, several methods.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fn, exportMethods, DTYPES } from "../src/index.js";

const identity = (x) => x;

test("matmul's declaration becomes its WIT signature", () => {
  const method = exportMethods({
    matmul: fn(
      { args: { a: ["float32", [-1, -1]], b: ["float32", [-1, -1]] }, returns: { out: ["float32", [-1, -1]] }, doc: "Matrix product." },
      (a) => a,
    ),
  });
  assert.deepEqual(method.signatures(), [
    {
      name: "matmul",
      inputs: [
        { name: "a", dtype: "f32", shape: [undefined, undefined] },
        { name: "b", dtype: "f32", shape: [undefined, undefined] },
      ],
      outputs: [{ name: "out", dtype: "f32", shape: [undefined, undefined] }],
      doc: "Matrix product.",
    },
  ]);
});

test("shapes: null or a bare dtype is any rank, [] a scalar, integers fixed sizes", () => {
  const [sig] = exportMethods({
    f: fn({ args: { x: "int32", y: ["int32", null], s: ["int32", []], z: ["uint8", [2, -1, 0]] }, returns: "bool" }, identity),
  }).signatures();
  assert.deepEqual(
    sig.inputs.map((s) => s.shape),
    [undefined, undefined, [], [2n, undefined, 0n]],
  );
  // One unnamed output is called `output`, as in the Rust SDK; doc defaults to "".
  assert.deepEqual(sig.outputs, [{ name: "output", dtype: "bool", shape: undefined }]);
  assert.equal(sig.doc, "");
});

test("every dtype name maps onto its WIT case", () => {
  const wit = {
    bool: "bool", uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64", int8: "i8", int16: "i16", int32: "i32",
    int64: "i64", float16: "f16", bfloat16: "bf16", float32: "f32", float64: "f64", string: "bytes", bytes: "bytes",
  };
  assert.deepEqual([...DTYPES].sort(), Object.keys(wit).sort());
  for (const [name, witName] of Object.entries(wit)) {
    const [sig] = exportMethods({ m: fn({ args: { x: name }, returns: name }, identity) }).signatures();
    assert.equal(sig.inputs[0].dtype, witName, name);
    assert.equal(sig.outputs[0].dtype, witName, name);
  }
});

test("several methods keep their order, and args and outputs theirs", () => {
  const method = exportMethods({
    first: fn({ args: { b: "int8", a: "int8" }, returns: { y: "int8", x: "int8" } }, identity),
    second: fn({ returns: "int8" }, () => ({ data: [1] })),
  });
  const sigs = method.signatures();
  assert.deepEqual(sigs.map((s) => s.name), ["first", "second"]);
  assert.deepEqual(sigs[0].inputs.map((s) => s.name), ["b", "a"]);
  assert.deepEqual(sigs[0].outputs.map((s) => s.name), ["y", "x"]);
  assert.deepEqual(sigs[1].inputs, []);
});

test("declaration mistakes throw at once, naming what is wrong", () => {
  const bad = (decl, pattern) => assert.throws(() => exportMethods({ m: fn(decl, identity) }), pattern);
  bad({ args: { x: "float" }, returns: "int8" }, /args `x`: unknown dtype "float"; use one of bool, /);
  bad({ args: { x: ["int8", [-2]] }, returns: "int8" }, /a dimension is -1 \(any size\) or an integer ≥ 0, got -2/);
  bad({ args: { x: ["int8", [1.5]] }, returns: "int8" }, /got 1.5/);
  bad({ args: { x: ["int8", 3] }, returns: "int8" }, /a shape is null \(any\) or an array/);
  bad({ args: { 0: "int8" }, returns: "int8" }, /is a number, which JavaScript would reorder/);
  bad({ args: {} }, /`returns` is required/);
  bad({ returns: {} }, /at least one output/);
  bad({ returns: "int8", docs: "typo" }, /unknown option "docs"/);
  assert.throws(() => fn({ returns: "int8" }, "not a function"), /the implementation, a function/);
  assert.throws(() => exportMethods({ "_hidden": fn({ returns: "int8" }, identity) }), /`_hidden` is not a valid method name/);
  assert.throws(() => exportMethods({ ["a".repeat(129)]: fn({ returns: "int8" }, identity) }), /not a valid method name/);
  assert.throws(() => exportMethods({ plain: identity }), /must be declared with fn/);
  assert.throws(() => exportMethods({}), /at least one method/);
});

test("the longest valid name and dots, dashes and underscores are accepted", () => {
  const name = "a".repeat(125) + "_.-";
  assert.equal(exportMethods({ [name]: fn({ returns: "int8" }, identity) }).signatures()[0].name, name);
});
