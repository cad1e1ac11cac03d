// The console's logic without a browser (node --test, from tests/run.sh): reading typed tensors
// against a signature, and reading the server's Prometheus text into percentiles.

import assert from "node:assert/strict";
import { test } from "node:test";

import { parseMetrics, quantile } from "../../host/console/activity.js";
import { parse, sample, shapeText } from "../../host/console/tensors.js";

const int32 = { dtype: "int32", shape: null };

test("nested lists become a row-major tensor with their shape", () => {
  assert.deepEqual(parse("[[1, 2, 3], [4, 5, 6]]", int32).tensor, { dtype: "int32", shape: [2, 3], data: [1, 2, 3, 4, 5, 6] });
  assert.deepEqual(parse("7", int32).tensor, { dtype: "int32", shape: [], data: [7] });
  assert.deepEqual(parse("[]", int32).tensor, { dtype: "int32", shape: [0], data: [] });
});

test("what is wrong is said for a person", () => {
  assert.match(parse("[1, 2", int32).error, /not valid JSON/);
  assert.match(parse("[[1, 2], [3]]", int32).error, /not rectangular/);
  assert.match(parse("[[1, 2], 3]", int32).error, /not rectangular/);
  assert.match(parse("[1.5]", int32).error, /element 0: 1.5 is not a whole number/);
  assert.match(parse("[2147483648]", int32).error, /out of range for int32/);
  assert.match(parse("[-1]", { dtype: "uint8", shape: null }).error, /out of range/);
  assert.match(parse("[70000]", { dtype: "float16", shape: null }).error, /out of range for float16/);
  assert.match(parse('["a"]', int32).error, /expected a number/);
  assert.match(parse("[1]", { dtype: "bool", shape: null }).error, /true or false/);
  assert.match(parse("[1]", { dtype: "string", shape: null }).error, /a string/);
  assert.equal(parse("[true, false]", { dtype: "bool", shape: null }).error, undefined);
});

test("shapes are checked against the signature: -1 is any size, [] a scalar", () => {
  const matrix = { dtype: "float32", shape: [-1, 2] };
  assert.equal(parse("[[1, 2], [3, 4], [5, 6]]", matrix).error, undefined);
  assert.match(parse("[[1, 2, 3]]", matrix).error, /dimension 1 must be 2/);
  assert.match(parse("[1, 2]", matrix).error, /2 dimension\(s\)/);
  assert.match(parse("[1]", { dtype: "float32", shape: [] }).error, /a scalar/);
  assert.equal(shapeText(null), "any shape");
  assert.equal(shapeText([]), "scalar");
  assert.equal(shapeText([-1, 3]), "[?, 3]");
});

test("samples fit their own signature, and add's samples add up to [11, 22]", () => {
  for (const spec of [int32, { dtype: "float32", shape: [-1, -1] }, { dtype: "string", shape: [3] }, { dtype: "bool", shape: [] }]) {
    assert.equal(parse(sample(spec, 0), spec).error, undefined, JSON.stringify(spec));
  }
  assert.equal(sample(int32, 0), "[1,2]");
  assert.equal(sample(int32, 1), "[10,20]");
});

const METRICS = `# HELP wasmrpc_calls_total Method calls by result code.
# TYPE wasmrpc_calls_total counter
wasmrpc_calls_total{tenant="default",method="add",code="OK"} 8
wasmrpc_calls_total{tenant="default",method="add",code="INVALID_ARGUMENT"} 2
wasmrpc_calls_total{tenant="team-a",method="odd \\"name\\"",code="OK"} 1
wasmrpc_call_duration_seconds_bucket{tenant="default",method="add",le="0.001"} 4
wasmrpc_call_duration_seconds_bucket{tenant="default",method="add",le="0.01"} 9
wasmrpc_call_duration_seconds_bucket{tenant="default",method="add",le="+Inf"} 10
wasmrpc_compiles_total 3
`;

test("the Prometheus text becomes calls, errors and buckets per method", () => {
  const methods = parseMetrics(METRICS);
  assert.deepEqual([...methods.keys()], ["add", 'team-a/odd "name"']);
  const add = methods.get("add");
  assert.equal(add.calls, 10);
  assert.equal(add.errors, 2);
  assert.deepEqual(add.buckets, [[0.001, 4], [0.01, 9], [Infinity, 10]]);
});

test("percentiles are interpolated within buckets, as Prometheus does", () => {
  const buckets = [[0.001, 4], [0.01, 9], [Infinity, 10]];
  assert.ok(Math.abs(quantile(0.2, buckets) - 0.0005) < 1e-12);
  assert.ok(Math.abs(quantile(0.5, buckets) - (0.001 + 0.009 * (1 / 5))) < 1e-12);
  // Past the last finite bound the estimate is that bound.
  assert.equal(quantile(0.99, buckets), 0.01);
  assert.ok(Number.isNaN(quantile(0.5, [[0.001, 0], [Infinity, 0]])));
});
