// The function itself, plain JavaScript: tensors are `{ dtype, shape, data }` with `data` a typed
// array (Float32Array here); return `{ data, shape }`.

/** Multiplies every element of a float32 tensor by a scalar factor. */
export function scale(x, factor) {
  const f = factor.data[0];
  return { data: x.data.map((v) => v * f), shape: x.shape };
}
