// Test helpers: build WIT-shaped argument tensors as componentize-js hands them to `call`
// (dtype as the WIT case name, shape as a BigUint64Array, data as a Uint8Array of a fresh buffer).

export function witTensor(dtype, shape, bytes) {
  return { dtype, shape: BigUint64Array.from(shape, BigInt), data: Uint8Array.from(bytes) };
}

/** The little-endian bytes of a typed array, as a plain Array (for readable expectations). */
export function leBytes(typed) {
  return Array.from(new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength));
}
