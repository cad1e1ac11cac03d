// Calls the Python example components, transpiled by jco, the way the host would: signatures(),
// then call(name, args) with wire tensors, and checks the answers against those of the Rust twins
// (examples/softmax, examples/strings). Run by check.sh; exits non-zero on the first wrong answer.
//
//   node --experimental-wasm-extended-const check.mjs DIR   (DIR holds softmax/ and strings/)
import assert from 'node:assert/strict';
import path from 'node:path';

const dir = path.resolve(process.argv[2]);
const { method: softmax } = await import(path.join(dir, 'softmax', 'softmax.js'));
const { method: strings } = await import(path.join(dir, 'strings', 'strings.js'));
const { method: dtypes } = await import(path.join(dir, 'dtypes', 'dtypes.js'));
const { method: errors } = await import(path.join(dir, 'errors', 'errors.js'));

const shape = (...d) => new BigUint64Array(d.map(BigInt));
const f32 = (...v) => new Uint8Array(new Float32Array(v).buffer);
const floats = (t) => Array.from(new Float32Array(t.data.slice().buffer));
// Length-prefixed UTF-8 elements, as the WIT `bytes` dtype carries strings.
const enc = (...s) => {
  const parts = s.map((x) => new TextEncoder().encode(x));
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
  let at = 0;
  for (const p of parts) { new DataView(out.buffer).setUint32(at, p.length, true); out.set(p, at + 4); at += 4 + p.length; }
  return out;
};
const dec = (t) => {
  const out = []; const v = new DataView(t.data.buffer, t.data.byteOffset);
  for (let at = 0; at < t.data.length;) { const n = v.getUint32(at, true); out.push(new TextDecoder().decode(t.data.slice(at + 4, at + 4 + n))); at += 4 + n; }
  return out;
};
const fails = (m, name, args) => { try { m.call(name, args); } catch (e) { return e.payload; } assert.fail(`${name} did not fail`); };
const close = (got, want) => got.forEach((g, i) => assert.ok(Math.abs(g - want[i]) < 1e-6, `${got} != ${want}`));

const sigs = softmax.signatures();
assert.deepEqual(sigs.map((s) => [s.name, s.inputs.map((i) => [i.name, i.dtype, i.shape]), s.outputs.map((o) => [o.name, o.dtype, o.shape])]),
  [['softmax', [['x', 'f32', undefined]], [['output', 'f32', undefined]]]]);
assert.match(sigs[0].doc, /^Softmax along the last axis/);
let [y] = softmax.call('softmax', [{ dtype: 'f32', shape: shape(2, 3), data: f32(1, 2, 3, 0, 0, 0) }]);
assert.deepEqual([y.dtype, Array.from(y.shape, Number)], ['f32', [2, 3]]);
close(floats(y), [0.09003057, 0.24472848, 0.66524094, 1 / 3, 1 / 3, 1 / 3]);
[y] = softmax.call('softmax', [{ dtype: 'f32', shape: shape(3), data: f32(1000, 1000, -1000) }]);
close(floats(y), [0.5, 0.5, 0]);
[y] = softmax.call('softmax', [{ dtype: 'f32', shape: shape(3, 0), data: f32() }]);
assert.deepEqual(Array.from(y.shape, Number), [3, 0]);
assert.deepEqual(fails(softmax, 'softmax', [{ dtype: 'f32', shape: shape(), data: f32(1) }]),
  { tag: 'invalid-argument', val: 'softmax needs a tensor of rank 1 or more, got a scalar' });
assert.deepEqual(fails(softmax, 'softmax', [{ dtype: 'i32', shape: shape(1), data: f32(1) }]),
  { tag: 'invalid-argument', val: 'argument `x`: expected float32, got int32' });
assert.deepEqual(fails(softmax, 'max', []),
  { tag: 'not-found', val: 'no method `max` in this component; it has: softmax' });

assert.deepEqual(strings.signatures().map((s) => [s.name, s.outputs[0].dtype]), [['upper', 'bytes'], ['length', 'i64']]);
let [u] = strings.call('upper', [{ dtype: 'bytes', shape: shape(2, 2), data: enc('hello', 'Wörld', '', 'straße') }]);
assert.deepEqual([Array.from(u.shape, Number), dec(u)], [[2, 2], ['HELLO', 'WÖRLD', '', 'STRASSE']]);
[u] = strings.call('length', [{ dtype: 'bytes', shape: shape(3), data: enc('abc', '日本語', '') }]);
assert.deepEqual([u.dtype, Array.from(new BigInt64Array(u.data.slice().buffer), Number)], ['i64', [3, 3, 0]]);
assert.equal(fails(strings, 'upper', [{ dtype: 'bytes', shape: shape(1), data: new Uint8Array([1, 0, 0, 0, 0xff]) }]).tag, 'invalid-argument');

// Every dtype's edge values, decoded into Python values inside the guest and encoded back: the
// bytes must come back as they went (NaNs as quiet NaNs, -0, subnormals, extremes).
const u8 = (a) => new Uint8Array(a.buffer);
const edges = {
  bool: ['bool', new Uint8Array([0, 1, 1, 0])],
  uint8: ['u8', new Uint8Array([0, 1, 127, 255])],
  uint16: ['u16', u8(new Uint16Array([0, 1, 0x8000, 0xffff]))],
  uint32: ['u32', u8(new Uint32Array([0, 1, 0x80000000, 0xffffffff]))],
  uint64: ['u64', u8(new BigUint64Array([0n, 1n, 1n << 63n, (1n << 64n) - 1n]))],
  int8: ['i8', u8(new Int8Array([-128, -1, 0, 127]))],
  int16: ['i16', u8(new Int16Array([-32768, -1, 0, 32767]))],
  int32: ['i32', u8(new Int32Array([-(2 ** 31), -1, 0, 2 ** 31 - 1]))],
  int64: ['i64', u8(new BigInt64Array([-(1n << 63n), -1n, 0n, (1n << 63n) - 1n]))],
  // 1.0, -0.0, +inf, -inf, smallest subnormal, largest finite, quiet NaN, 0.5 (as 2 by 4)
  float16: ['f16', u8(new Uint16Array([0x3c00, 0x8000, 0x7c00, 0xfc00, 0x0001, 0x7bff, 0x7e00, 0x3800]))],
  bfloat16: ['bf16', u8(new Uint16Array([0x3f80, 0x8000, 0x7f80, 0xff80, 0x0001, 0x7f7f, 0x7fc0, 0x3f00]))],
  float32: ['f32', u8(new Float32Array([1, -0, Infinity, -Infinity, 1.4e-45, 3.4028234663852886e38, NaN, 0.5]))],
  float64: ['f64', u8(new Float64Array([1, -0, Infinity, -Infinity, 5e-324, Number.MAX_VALUE, NaN, 0.5]))],
  string: ['bytes', enc('', 'héllo', '日本', 'x')],
  bytes: ['bytes', new Uint8Array([0, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xfe, 1, 0, 0, 0, 0x80, 0, 0, 0, 0])],
};
assert.equal(dtypes.signatures().length, Object.keys(edges).length);
for (const [name, [wit, data]] of Object.entries(edges)) {
  const n = name === 'float16' || name === 'bfloat16' || name === 'float32' || name === 'float64' ? [2, 4] : [4];
  const [out] = dtypes.call(`roundtrip_${name}`, [{ dtype: wit, shape: shape(...n), data }]);
  assert.deepEqual([out.dtype, Array.from(out.shape, Number), Array.from(out.data)], [wit, n, Array.from(data)], name);
}
assert.equal(fails(dtypes, 'roundtrip_bool', [{ dtype: 'bool', shape: shape(1), data: new Uint8Array([2]) }]).val,
  'argument `x`: element 0 is 2; a bool must be 0 or 1');
console.log(`every dtype round-trips through Python values: ${Object.keys(edges).join(', ')}`);

// Every row of the SDK's error table, raised inside the component.
const raised = (kind) => fails(errors, 'fail', [{ dtype: 'bytes', shape: shape(), data: enc(kind) }]);
for (const [kind, tag, val] of [
  ['InvalidArgument', 'invalid-argument', 'bad value'],
  ['FailedPrecondition', 'failed-precondition', 'not now'],
  ['OutOfRange', 'out-of-range', 'past the end'],
  ['Unimplemented', 'unimplemented', 'later'],
  ['Internal', 'internal', 'a bug'],
  ['ResourceExhausted', 'resource-exhausted', 'too big'],
  ['NotFound', 'not-found', 'no such row'],
  ['ValueError', 'invalid-argument', 'x must be positive'],
  ['TypeError', 'invalid-argument', 'not a number'],
  ['IndexError', 'out-of-range', 'list index out of range'],
  ['KeyError', 'not-found', 'k'],
  ['NotImplementedError', 'unimplemented', 'NotImplementedError'],
  ['MemoryError', 'resource-exhausted', 'MemoryError'],
  ['ZeroDivisionError', 'internal', 'ZeroDivisionError: division by zero'],
  ['no such kind', 'not-found', 'no such kind'],  // the app's own dict look-up: a KeyError
]) assert.deepEqual(raised(kind), { tag, val }, kind);
const [ok] = errors.call('fail', [{ dtype: 'bytes', shape: shape(), data: enc('none') }]);
assert.deepEqual(Array.from(ok.data), [1], 'the instance still answers after the errors');
console.log('every error row arrives as its WIT case');

// The cost of one call inside a warm instance (the host instantiates afresh for every call).
const x = f32(...Array.from({ length: 1000 }, (_, i) => i / 1000));
const n = 200; const t0 = performance.now();
for (let i = 0; i < n; i++) softmax.call('softmax', [{ dtype: 'f32', shape: shape(1000), data: x }]);
console.log(`softmax of 1,000 float32 in a warm instance: ${((performance.now() - t0) / n).toFixed(2)} ms a call (mean of ${n})`);
console.log('all answers as expected');
