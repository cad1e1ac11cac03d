// Matrix product of two 2-D float32 tensors, the JavaScript twin of examples/matmul (Rust): the same
// signature, answers and errors. Build it from the repository root (componentize-js only sees files
// below the directory it runs in, so the SDK is imported by a relative path):
//
//   CJS=$(tests/toolchains/js.sh | tail -1)
//   $CJS examples/js/matmul/app.js --wit wit --world-name tensor-function \
//       -d stdio random clocks http fetch-event -o target/js/matmul.wasm

import { fn, exportMethods, SdkError } from "../../../guest-sdk/js/src/index.js";

export const method = exportMethods({
  matmul: fn(
    {
      args: { a: ["float32", [-1, -1]], b: ["float32", [-1, -1]] },
      returns: ["float32", [-1, -1]],
      doc: "Matrix product of two 2-D float32 tensors: `[m, k] × [k, n] → [m, n]`.",
    },
    (a, b) => {
      const [m, k] = a.shape;
      const [k2, n] = b.shape;
      if (k !== k2) {
        throw SdkError.invalidArgument(`inner dimensions differ: a has shape [${m}, ${k}], b has shape [${k2}, ${n}]`);
      }
      const out = new Float32Array(m * n);
      // i-k-j order, as the Rust twin: the inner loop runs along rows of `b` and `out`. Rounding the
      // product to float32 before the (float32-stored) sum gives the Rust twin's f32 answers exactly.
      for (let i = 0; i < m; i++) {
        for (let p = 0; p < k; p++) {
          const aip = a.data[i * k + p];
          for (let j = 0; j < n; j++) out[i * n + j] += Math.fround(aip * b.data[p * n + j]);
        }
      }
      return { data: out, shape: [m, n] };
    },
  ),
});
