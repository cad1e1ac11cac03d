// Element-wise sum of two float32 tensors of the same shape: the JavaScript twin of examples/add's
// `add_float32`, for the issue-33 rows of host/benches/run.sh (bench-only, not an example). Built by
// host/benches/guests/build.sh from the repository root.

import { fn, exportMethods, SdkError } from "@wasmrpc/guest";

export const method = exportMethods({
  add: fn(
    {
      args: { a: ["float32", [-1]], b: ["float32", [-1]] },
      returns: ["float32", [-1]],
      doc: "Element-wise sum of two float32 tensors of the same shape (IEEE 754).",
    },
    (a, b) => {
      if (a.data.length !== b.data.length) {
        throw SdkError.invalidArgument(`lengths differ: ${a.data.length} and ${b.data.length}`);
      }
      const out = new Float32Array(a.data.length);
      for (let i = 0; i < out.length; i++) out[i] = a.data[i] + b.data[i];
      return { data: out, shape: a.shape };
    },
  ),
});
