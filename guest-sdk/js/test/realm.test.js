// Under componentize-js the bindings that lift arguments run in another realm than the user's
// module, so their Uint8Array and BigUint64Array are not this module's classes. node:vm reproduces
// that: the SDK must take such tensors, and hand back what it decoded from them as its own classes.
import { test } from "node:test";
import assert from "node:assert/strict";
import vm from "node:vm";
import { fn, exportMethods } from "../src/index.js";

const other = vm.createContext({});
const foreign = (dtype, shape, bytes) =>
  vm.runInContext(`({ dtype: ${JSON.stringify(dtype)}, shape: BigUint64Array.from(${JSON.stringify(shape)}, BigInt), data: Uint8Array.from(${JSON.stringify(bytes)}) })`, other);

test("tensors lifted in another realm are accepted, and bytes elements come back out", () => {
  const arg = foreign("bytes", [2], [1, 0, 0, 0, 0xff, 0, 0, 0, 0]);
  assert.ok(!(arg.data instanceof Uint8Array), "the vm realm's Uint8Array is a different class");
  const seen = [];
  const method = exportMethods({ echo: fn({ args: { x: "bytes" }, returns: "bytes" }, (x) => (seen.push(x), x)) });
  const result = method.call("echo", [arg]);
  if (result.tag !== "ok") assert.fail(result.val.val);
  assert.ok(seen[0].data[0] instanceof Uint8Array, "elements are this realm's Uint8Array");
  assert.deepEqual(Array.from(result.val[0].data), [1, 0, 0, 0, 0xff, 0, 0, 0, 0]);
});

test("a float32 tensor from another realm arrives as this realm's Float32Array", () => {
  const method = exportMethods({ neg: fn({ args: { x: "float32" }, returns: "float32" }, (x) => {
    assert.ok(x.data instanceof Float32Array);
    return { data: x.data.map((v) => -v), shape: x.shape };
  }) });
  const result = method.call("neg", [foreign("f32", [1], [0, 0, 0x80, 0x3f])]);
  assert.equal(result.tag, "ok");
  assert.deepEqual(Array.from(result.val[0].data), [0, 0, 0x80, 0xbf]);
});
