// Compiled by `tsc --noEmit -p guest-sdk/js/types-test` to check that src/index.d.ts accepts what
// README.md shows and refuses obvious mistakes (the @ts-expect-error lines must stay errors).
import { fn, exportMethods, SdkError, type Tensor } from "../src/index.js";

export const method = exportMethods({
  matmul: fn(
    { args: { a: ["float32", [-1, -1]], b: ["float32", [-1, -1]] }, returns: { out: ["float32", [-1, -1]] }, doc: "Matrix product." },
    (a: Tensor<"float32">, b: Tensor<"float32">) => {
      if (a.shape[1] !== b.shape[0]) throw SdkError.invalidArgument("inner dimensions differ");
      return { out: { data: new Float32Array(a.shape[0] * b.shape[1]), shape: [a.shape[0], b.shape[1]] } };
    },
  ),
  count: fn({ args: { x: "string" }, returns: ["int64", []] }, (x: Tensor<"string">) => ({ data: [BigInt(x.data.length)], shape: [] })),
  flags: fn({ returns: "bool" }, () => ({ data: [true, false] })),
});

const r = method.call("matmul", []);
export const code: string | undefined = r.tag === "err" ? r.val.tag : undefined;
export const canonical = new SdkError("OUT_OF_RANGE", "index 7 of 4");

// @ts-expect-error: a float32 output cannot be a list of strings
fn({ returns: "float32" }, () => ({ data: ["x"] }));
// @ts-expect-error: unknown dtype
fn({ returns: "float" }, () => ({ data: [] }));
// @ts-expect-error: unknown error code
new SdkError("TEAPOT", "x");
