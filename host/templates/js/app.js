// {{name}}: a wasmrpc function in JavaScript, built into a WebAssembly component by
// `wasmrpc build app.js` (esbuild and componentize-js; `@wasmrpc/guest` is resolved by the build).
// Each entry of `exportMethods` is a method, with its tensors' dtypes and shapes and its doc.

import { exportMethods, fn } from "@wasmrpc/guest";

import { scale } from "./scale.js";

export const method = exportMethods({
  scale: fn(
    {
      args: { x: "float32", factor: ["float32", []] },
      returns: "float32",
      doc: "Multiplies every element of a float32 tensor by a scalar factor.",
    },
    scale,
  ),
});
