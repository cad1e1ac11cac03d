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

// The functions below run in every call. componentize-js's engine interprets them, and its
// `Array.from`, `every`, `for…of` and other iterator-driven builtins are themselves interpreted
// JavaScript: plain indexed loops cost a call several times less (docs/benchmarks.md, issue 33).

/** Whether `actual` (an array of numbers) fits `declared` (null or an array with -1 for any size). */
export function shapeMatches(declared, actual) {
  if (declared === null) return true;
  if (declared.length !== actual.length) return false;
  for (let i = 0; i < declared.length; i++) {
    if (declared[i] !== -1 && declared[i] !== actual[i]) return false;
  }
  return true;
}

/** `[_, 3]` for a declared shape, `[2, 3]` for an actual one. */
export function formatShape(shape) {
  return `[${shape.map((d) => (d === -1 ? "_" : String(d))).join(", ")}]`;
}

/** The number of elements of `shape` (1 for a scalar), or `undefined` past Number.MAX_SAFE_INTEGER. */
export function elementCount(shape) {
  let n = 1;
  for (let i = 0; i < shape.length; i++) {
    n *= shape[i];
    if (!Number.isSafeInteger(n)) return undefined;
  }
  return n;
}

/**
 * A shape as an Array of numbers: from the WIT's dimensions (a BigUint64Array or an Array of
 * bigint, from any realm) or from what a method returned (any array-like or iterable of numbers).
 */
export function shapeNumbers(dims) {
  const indexed = (Array.isArray(dims) || ArrayBuffer.isView(dims)) && typeof dims.length === "number";
  if (!indexed) return Array.from(dims, Number);
  const out = new Array(dims.length);
  for (let i = 0; i < dims.length; i++) out[i] = Number(dims[i]);
  return out;
}

/** `shape` (an Array of integers ≥ 0) as the WIT's `list<u64>`. */
export function witDims(shape) {
  const out = new BigUint64Array(shape.length);
  for (let i = 0; i < shape.length; i++) out[i] = BigInt(shape[i]);
  return out;
}
