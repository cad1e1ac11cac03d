// The floor of a JavaScript call without the SDK (bench-only): the WIT export by hand, answering
// `noop` like host/benches/guests/js_noop, so that `js_noop` less this is what the SDK costs a call
// (docs/benchmarks.md, issue 33, "Faster calls").
//
// Build: `wasmrpc build host/benches/guests/js_bare/app.js`.

const spec = (name, shape) => ({ name, dtype: "f32", shape });
const signatures = [
  {
    name: "noop",
    inputs: [spec("a", undefined), spec("b", undefined)],
    outputs: [spec("output", [])],
    doc: "Returns 0 without the SDK: the floor of a JavaScript call.",
  },
];

export const method = {
  signatures: () => signatures,
  call: () => ({ tag: "ok", val: [{ dtype: "f32", shape: new BigUint64Array(0), data: new Uint8Array(4) }] }),
};
