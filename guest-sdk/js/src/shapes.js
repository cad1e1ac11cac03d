// Shapes: declared shapes (as users write them: `null` any rank, `[]` a scalar, `-1` a dimension of
// any size, a non-negative integer a fixed size), their WIT form (`option<list<option<u64>>>`), the
// check of an actual shape against a declaration, and how both print in messages (`[_, 3]`, `[2, 3]`),
// the same as the Rust SDK so callers see one wording whatever language the function is in.

/** A declared shape checked and copied: `null` or an array of integers ≥ -1. TypeError otherwise. */
export function parseDeclaredShape(shape, where) {
  if (shape === null || shape === undefined) return null;
  if (!Array.isArray(shape)) throw new TypeError(`${where}: a shape is null (any) or an array, got ${JSON.stringify(shape)}`);
  return shape.map((d) => {
    if (!Number.isSafeInteger(d) || d < -1) {
      throw new TypeError(`${where}: a dimension is -1 (any size) or an integer ≥ 0, got ${JSON.stringify(d)}`);
    }
    return d;
  });
}

/** The WIT `shape` of a spec: `undefined` for any rank, else one `bigint` or `undefined` per dimension. */
export function witShape(declared) {
  if (declared === null) return undefined;
  return declared.map((d) => (d === -1 ? undefined : BigInt(d)));
}

/** Whether `actual` (an array of numbers) fits `declared` (null or an array with -1 for any size). */
export function shapeMatches(declared, actual) {
  if (declared === null) return true;
  return declared.length === actual.length && declared.every((d, i) => d === -1 || d === actual[i]);
}

/** `[_, 3]` for a declared shape, `[2, 3]` for an actual one. */
export function formatShape(shape) {
  return `[${shape.map((d) => (d === -1 ? "_" : String(d))).join(", ")}]`;
}

/** The number of elements of `shape` (1 for a scalar), or `undefined` past Number.MAX_SAFE_INTEGER. */
export function elementCount(shape) {
  let n = 1;
  for (const d of shape) {
    n *= d;
    if (!Number.isSafeInteger(n)) return undefined;
  }
  return n;
}
