// The function's tests, with Node's own runner: `node --test` (or `npm test`).

import assert from "node:assert/strict";
import { test } from "node:test";

import { scale } from "./scale.js";

test("scales every element", () => {
  const x = { dtype: "float32", shape: [2, 2], data: Float32Array.from([1, 2, 3, 4]) };
  const out = scale(x, { dtype: "float32", shape: [], data: Float32Array.from([2.5]) });
  assert.deepEqual(out.shape, [2, 2]);
  assert.deepEqual(Array.from(out.data), [2.5, 5, 7.5, 10]);
});
