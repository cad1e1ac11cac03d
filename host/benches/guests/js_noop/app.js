// The floor of a JavaScript call (bench-only): `noop` takes the same two float32 tensors as the
// `add` guests, reads neither and returns a scalar 0, so its latency is what a fresh SpiderMonkey
// instance, the engine's entry and the arguments' lifting cost without the SDK's conversion or any
// loop (docs/benchmarks.md, issue 33, "The floor of a call").
//
// Build: `wasmrpc build host/benches/guests/js_noop/app.js`.

import { fn, exportMethods } from "@wasmrpc/guest";

export const method = exportMethods({
  noop: fn(
    { args: { a: "float32", b: "float32" }, returns: ["float32", []], doc: "Returns 0: the floor of a JavaScript call." },
    () => ({ data: [0], shape: [] }),
  ),
});
