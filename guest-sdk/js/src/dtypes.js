// The element types: what each dtype name a user writes is on the wire (its WIT `dtype` case and
// byte size) and in JavaScript (the typed array its elements arrive in), and the codecs between a
// tensor's little-endian wire bytes and those arrays.
//
// | dtype      | WIT     | bytes | arrives as / returned from            |
// |------------|---------|-------|---------------------------------------|
// | bool       | bool    | 1     | Uint8Array of 0 and 1                 |
// | uint8…64   | u8…u64  | 1–8   | Uint8Array … BigUint64Array           |
// | int8…64    | i8…i64  | 1–8   | Int8Array … BigInt64Array             |
// | float16    | f16     | 2     | Float32Array (exact; rounded back)    |
// | bfloat16   | bf16    | 2     | Float32Array (exact; rounded back)    |
// | float32/64 | f32/f64 | 4/8   | Float32Array / Float64Array           |
// | string     | bytes   | var.  | Array of string (UTF-8 checked)       |
// | bytes      | bytes   | var.  | Array of Uint8Array                   |
//
// The names are those callers see in JSON (TensorFlow's), as in the Rust SDK; `bytes` is the JS
// twin of the Rust SDK's `Vec<u8>` elements: same wire dtype as `string`, without the UTF-8 check.

import { bf16Bits, bf16Value, f16Bits, f16Value } from "./half.js";

/** Whether this engine stores numbers little-endian, so that wire bytes can be viewed directly. */
export const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// name → { wit, size (bytes per element, 0 for variable), Array (typed array class), get/set (the
// DataView accessors for the big-endian path), kind }.
const TABLE = {
  bool: { wit: "bool", size: 1, Array: Uint8Array, kind: "bool" },
  uint8: { wit: "u8", size: 1, Array: Uint8Array, kind: "int" },
  uint16: { wit: "u16", size: 2, Array: Uint16Array, kind: "int", view: "Uint16" },
  uint32: { wit: "u32", size: 4, Array: Uint32Array, kind: "int", view: "Uint32" },
  uint64: { wit: "u64", size: 8, Array: BigUint64Array, kind: "bigint", view: "BigUint64" },
  int8: { wit: "i8", size: 1, Array: Int8Array, kind: "int" },
  int16: { wit: "i16", size: 2, Array: Int16Array, kind: "int", view: "Int16" },
  int32: { wit: "i32", size: 4, Array: Int32Array, kind: "int", view: "Int32" },
  int64: { wit: "i64", size: 8, Array: BigInt64Array, kind: "bigint", view: "BigInt64" },
  float16: { wit: "f16", size: 2, Array: Float32Array, kind: "half", toBits: f16Bits, fromBits: f16Value },
  bfloat16: { wit: "bf16", size: 2, Array: Float32Array, kind: "half", toBits: bf16Bits, fromBits: bf16Value },
  float32: { wit: "f32", size: 4, Array: Float32Array, kind: "float", view: "Float32" },
  float64: { wit: "f64", size: 8, Array: Float64Array, kind: "float", view: "Float64" },
  string: { wit: "bytes", size: 0, Array: Array, kind: "string" },
  bytes: { wit: "bytes", size: 0, Array: Array, kind: "bytes" },
};

/** Every dtype name a declaration may use. */
export const DTYPES = Object.freeze(Object.keys(TABLE));

/** The table entry of dtype `name`, or a TypeError listing the names (a bug in the declaration). */
export function dtypeInfo(name) {
  const info = Object.hasOwn(TABLE, name) ? TABLE[name] : undefined;
  if (!info) throw new TypeError(`unknown dtype ${JSON.stringify(name)}; use one of ${DTYPES.join(", ")}`);
  return info;
}

/** The user-facing name of a WIT dtype case, for messages about what a caller sent. */
export function witDtypeName(wit) {
  for (const [name, info] of Object.entries(TABLE)) if (info.wit === wit) return name === "bytes" ? "string" : name;
  return String(wit);
}

/** Thrown by the codecs; the caller adds which argument or output it is about and picks the code. */
export class CodecError extends Error {}

/**
 * Decodes `count` elements of dtype `name` from wire bytes `data` (a Uint8Array). Fixed-size numeric
 * elements are viewed in place when the bytes are aligned and the engine is little-endian (the
 * component hands over a fresh copy, so the view is the caller's to keep).
 */
export function decode(name, data, count, { littleEndian = LITTLE_ENDIAN } = {}) {
  return decodeAs(dtypeInfo(name), data, count, littleEndian);
}

/** `decode` with the dtype's table entry ({@link dtypeInfo}) already looked up: the per-call path. */
export function decodeAs(info, data, count, littleEndian = LITTLE_ENDIAN) {
  if (info.size === 0) return decodeVariable(info.kind, data, count);
  checkLength(data, count, info.size);
  switch (info.kind) {
    case "bool": {
      const i = data.findIndex((b) => b > 1);
      if (i >= 0) throw new CodecError(`element ${i} is ${data[i]}; a bool must be 0 or 1`);
      return new Uint8Array(data);
    }
    case "half": {
      const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = info.fromBits(view.getUint16(2 * i, true));
      return out;
    }
    default: {
      if (info.size === 1) return new info.Array(data.buffer, data.byteOffset, count);
      if (littleEndian) {
        // A typed array view needs an aligned offset; copy when the bytes do not start on one.
        const aligned = data.byteOffset % info.size === 0 ? data : data.slice();
        return new info.Array(aligned.buffer, aligned.byteOffset, count);
      }
      const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
      const out = new info.Array(count);
      for (let i = 0; i < count; i++) out[i] = view[`get${info.view}`](i * info.size, true);
      return out;
    }
  }
}

/**
 * Encodes `values` (the dtype's typed array, or a plain Array converted as the typed array's
 * constructor converts) as wire bytes, returning a Uint8Array.
 */
export function encode(name, values, { littleEndian = LITTLE_ENDIAN } = {}) {
  return encodeAs(name, dtypeInfo(name), values, littleEndian);
}

/** `encode` with the dtype's table entry already looked up: the per-call path. */
export function encodeAs(name, info, values, littleEndian = LITTLE_ENDIAN) {
  if (info.size === 0) return encodeVariable(info.kind, values);
  const typed = toTyped(name, info, values);
  switch (info.kind) {
    case "bool": {
      const i = typed.findIndex((b) => b > 1);
      if (i >= 0) throw new CodecError(`element ${i} is ${typed[i]}; a bool must be 0 or 1 (or true or false)`);
      return new Uint8Array(typed.buffer, typed.byteOffset, typed.length);
    }
    case "half": {
      const out = new Uint8Array(typed.length * 2);
      const view = new DataView(out.buffer);
      for (let i = 0; i < typed.length; i++) view.setUint16(2 * i, info.toBits(typed[i]), true);
      return out;
    }
    default: {
      if (littleEndian || info.size === 1) return new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
      const out = new Uint8Array(typed.length * info.size);
      const view = new DataView(out.buffer);
      for (let i = 0; i < typed.length; i++) view[`set${info.view}`](i * info.size, typed[i], true);
      return out;
    }
  }
}

// The values as the dtype's typed array: the array itself when it already is one, a conversion of
// a plain Array, and an error for any other typed array: a Float64Array returned for a float32
// output is more often a bug than a wish to round, and the Rust SDK refuses it at compile time.
function toTyped(name, info, values) {
  if (isA(values, info.Array)) return values;
  if (info.kind === "half" && isA(values, Float64Array)) return values;
  if (Array.isArray(values)) {
    if (info.kind === "bigint") return info.Array.from(values, (v) => BigInt(v));
    if (info.kind === "bool") return Uint8Array.from(values, (v) => (v === true ? 1 : v === false ? 0 : v));
    return info.Array.from(values);
  }
  throw new CodecError(`${name} data must be a ${info.Array.name} or an Array, got ${describe(values)}`);
}

/**
 * Whether `value` is a `Class` (a typed array class) from any realm. Not `instanceof`: under
 * componentize-js the bindings that lift `tensor.data` run in another realm (StarlingMonkey's content
 * global), whose typed array classes are not this module's, so `instanceof` would say no.
 */
export function isA(value, Class) {
  return Object.prototype.toString.call(value) === tagOf(Class);
}

// `[object Float32Array]` for Float32Array: made once a class, not once a check.
const TAGS = new Map();
function tagOf(Class) {
  let tag = TAGS.get(Class);
  if (tag === undefined) TAGS.set(Class, (tag = `[object ${Class.name}]`));
  return tag;
}

/** A short description of a value's type for messages: `Int32Array`, `number`, `null`. */
export function describe(value) {
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  return value.constructor?.name ?? "object";
}

function checkLength(data, count, size) {
  const expected = count * size;
  if (data.length !== expected) {
    throw new CodecError(`${count} elements need ${expected} bytes of data, got ${data.length}`);
  }
}

// `fatal` makes invalid UTF-8 an error instead of U+FFFD: a caller's bad bytes are their mistake,
// and silently changing their data would hide it (the Rust SDK refuses them too).
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });
const utf8Encoder = new TextEncoder();

// Variable-length elements: each one's little-endian u32 length, then its bytes.
function decodeVariable(kind, data, count) {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  // Every element takes at least its 4-byte length: a huge count with little data fails here.
  if (count > data.length / 4) {
    throw new CodecError(`${count} elements need at least ${count * 4} bytes of data, got ${data.length}`);
  }
  const out = new Array(count);
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + 4 > data.length) throw new CodecError(`element ${i} of ${count}: the data ends before its length`);
    const len = view.getUint32(at, true);
    at += 4;
    if (at + len > data.length) {
      throw new CodecError(`element ${i} of ${count}: its length ${len} runs past the end of the data`);
    }
    const bytes = data.subarray(at, at + len);
    at += len;
    // A copy made with this realm's Uint8Array (`bytes.slice()` would keep the bindings' realm).
    if (kind === "bytes") out[i] = new Uint8Array(bytes);
    else {
      try {
        out[i] = utf8Decoder.decode(bytes);
      } catch {
        throw new CodecError(`element ${i} of ${count} is not valid UTF-8; declare the dtype "bytes" to take any bytes`);
      }
    }
  }
  if (at !== data.length) throw new CodecError(`${data.length - at} bytes of data left after the last of ${count} elements`);
  return out;
}

function encodeVariable(kind, values) {
  if (!Array.isArray(values)) throw new CodecError(`${kind} data must be an Array, got ${describe(values)}`);
  const parts = values.map((v, i) => {
    if (kind === "string" && typeof v === "string") return utf8Encoder.encode(v);
    if (kind === "bytes" && isA(v, Uint8Array)) return v;
    const want = kind === "string" ? "a string" : "a Uint8Array";
    throw new CodecError(`element ${i} must be ${want}, got ${describe(v)}`);
  });
  const total = parts.reduce((n, p) => n + 4 + p.length, 0);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const p of parts) {
    view.setUint32(at, p.length, true);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}
