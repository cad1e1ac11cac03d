// Methods: `fn(declaration, implementation)` declares one method, `exportMethods({ name: fn(...) })`
// turns several into the object componentize-js exports as the WIT interface `method`
// (`signatures()` and `call(name, args)`). This is where arguments are decoded and checked against
// their declaration, the implementation is called, and its outputs are checked and encoded.

import { dtypeInfo, decodeAs, describe, encodeAs, isA, witDtypeName, CodecError } from "./dtypes.js";
import { SdkError, toWitError } from "./errors.js";
import { elementCount, formatShape, parseDeclaredShape, shapeMatches, shapeNumbers, witDims, witShape } from "./shapes.js";

const DECLARATION = Symbol("wasmrpc.method");

// The server's one rule for method names (proto/src/names.rs): checked here so that a bad name fails
// when the module loads (at componentize time) rather than at upload.
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const NAME_RULE = "1 to 128 characters from A-Z, a-z, 0-9, `_`, `-` and `.`, starting with a letter or digit";

// An argument or output spec: "float32" (any shape), ["float32"] or ["float32", shape].
function parseSpec(spec, where) {
  const [dtype, shape, ...rest] = typeof spec === "string" ? [spec] : Array.isArray(spec) ? spec : [];
  if (typeof dtype !== "string" || rest.length > 0) {
    throw new TypeError(`${where}: a spec is "dtype" or ["dtype", shape], got ${JSON.stringify(spec)}`);
  }
  try {
    dtypeInfo(dtype);
  } catch (e) {
    throw new TypeError(`${where}: ${e.message}`);
  }
  return { dtype, shape: parseDeclaredShape(shape, where) };
}

// Named specs in declaration order. Object key order is insertion order except for keys that look
// like array indices ("0", "1"), which JavaScript puts first: refuse those rather than reorder.
function parseSpecs(specs, where) {
  if (specs === null || typeof specs !== "object" || Array.isArray(specs)) {
    throw new TypeError(`${where}: expected an object of name: spec, got ${JSON.stringify(specs)}`);
  }
  return Object.entries(specs).map(([name, spec]) => {
    if (/^(0|[1-9][0-9]*)$/.test(name)) {
      throw new TypeError(`${where}: the name ${JSON.stringify(name)} is a number, which JavaScript would reorder; use a word`);
    }
    return { name, ...parseSpec(spec, `${where} \`${name}\``) };
  });
}

/**
 * Declares one method: `fn({ args, returns, doc }, implementation)`.
 *
 * - `args`: `{ name: spec }` in positional order; a spec is `"dtype"` (any shape) or
 *   `["dtype", shape]` with shape `null` (any), `[]` (scalar) or an array of sizes, `-1` for any.
 * - `returns`: one spec (the output is named `output`, as in the Rust SDK) or `{ name: spec }`.
 * - `doc`: the method's documentation (default `""`).
 *
 * The implementation gets one tensor `{ dtype, shape, data }` per argument and returns one tensor for
 * a single output, or an Array (in order) or an object (by name) of tensors for several.
 * Declaration mistakes throw a TypeError at once, so they fail the build, not a call.
 */
export function fn(declaration, implementation) {
  if (declaration === null || typeof declaration !== "object") {
    throw new TypeError(`fn: the first argument is { args, returns, doc }, got ${JSON.stringify(declaration)}`);
  }
  if (typeof implementation !== "function") {
    throw new TypeError(`fn: the second argument is the implementation, a function, got ${describe(implementation)}`);
  }
  const { args = {}, returns, doc = "", ...unknown } = declaration;
  const extra = Object.keys(unknown);
  if (extra.length) throw new TypeError(`fn: unknown option ${extra.map((k) => JSON.stringify(k)).join(", ")}; use args, returns, doc`);
  if (returns === undefined) throw new TypeError("fn: `returns` is required: a spec, or { name: spec } for several outputs");
  if (typeof doc !== "string") throw new TypeError(`fn: doc must be a string, got ${describe(doc)}`);
  const inputs = parseSpecs(args, "args");
  const outputs =
    typeof returns === "string" || Array.isArray(returns)
      ? [{ name: "output", ...parseSpec(returns, "returns") }]
      : parseSpecs(returns, "returns");
  if (outputs.length === 0) throw new TypeError("fn: a method returns at least one output");
  return { [DECLARATION]: true, inputs, outputs, doc, implementation };
}

/**
 * The `method` interface export: `export const method = exportMethods({ matmul: fn(...), ... })`.
 * Keys are the method names.
 */
export function exportMethods(methods) {
  if (methods === null || typeof methods !== "object") {
    throw new TypeError(`exportMethods: expected an object of name: fn(...), got ${describe(methods)}`);
  }
  const table = new Map();
  for (const [name, method] of Object.entries(methods)) {
    if (!NAME_RE.test(name)) throw new TypeError(`\`${name}\` is not a valid method name: ${NAME_RULE}`);
    if (!method || method[DECLARATION] !== true) {
      throw new TypeError(`exportMethods: \`${name}\` must be declared with fn(declaration, implementation)`);
    }
    table.set(name, method);
  }
  if (table.size === 0) throw new TypeError("exportMethods: export at least one method");
  // Built once: signatures() must be pure and quick (the host calls it under a deadline).
  const signatures = [...table].map(([name, m]) => ({
    name,
    inputs: m.inputs.map(witSpec),
    outputs: m.outputs.map(witSpec),
    doc: m.doc,
  }));
  return {
    signatures: () => signatures,
    call: (name, args) => call(table, name, args),
  };
}

function witSpec({ name, dtype, shape }) {
  return { name, dtype: dtypeInfo(dtype).wit, shape: witShape(shape) };
}

// One call: returns the WIT result explicitly ({ tag: "ok" | "err", val }) instead of throwing,
// because componentize-js rethrows (traps on) anything thrown that is an Error without `payload`.
function call(table, name, args) {
  const method = table.get(name);
  if (!method) {
    return err("not-found", `no method \`${name}\` in this component; it has: ${[...table.keys()].join(", ")}`);
  }
  try {
    const inputs = decodeArgs(name, method.inputs, args);
    let returned;
    try {
      returned = method.implementation(...inputs);
    } catch (thrown) {
      return { tag: "err", val: toWitError(thrown, `method ${name}`) };
    }
    if (returned !== null && typeof returned === "object" && typeof returned.then === "function") {
      // An `async` method: componentize-js runs the event loop until the promise the export
      // returns settles, and takes its value as the result. A rejection is the method's throw.
      return Promise.resolve(returned).then(
        (value) => encoded(name, method.outputs, value),
        (thrown) => ({ tag: "err", val: toWitError(thrown, `method ${name}`) }),
      );
    }
    return encoded(name, method.outputs, returned);
  } catch (thrown) {
    return sdkFailure(thrown);
  }
}

// The result of a method that returned `value`: its outputs, or why they do not match.
function encoded(name, outputs, value) {
  try {
    return { tag: "ok", val: encodeOutputs(name, outputs, value) };
  } catch (thrown) {
    return sdkFailure(thrown);
  }
}

// The SDK's own checks throw SdkErrors; anything else here is a bug in this SDK.
function sdkFailure(thrown) {
  return { tag: "err", val: thrown instanceof SdkError ? toWitError(thrown) : toWitError(thrown, `wasmrpc guest SDK`) };
}

function err(code, message) {
  return { tag: "err", val: { tag: code, val: message } };
}

// The arguments as tensors, checked in order: count, dtype, shape numbers, data length, declared shape.
// The host has already checked them against the signature; these checks keep the function safe when
// it is called some other way (tests, jco) and say exactly what is wrong.
function decodeArgs(method, specs, args) {
  if (!Array.isArray(args) || args.length !== specs.length) {
    const got = Array.isArray(args) ? args.length : describe(args);
    throw SdkError.invalidArgument(`method ${method} takes ${specs.length} argument${specs.length === 1 ? "" : "s"}, got ${got}`);
  }
  // Indexed loops, and messages formatted only on a failure: this runs in every call (shapes.js).
  const tensors = new Array(specs.length);
  for (let i = 0; i < specs.length; i++) tensors[i] = decodeArg(specs[i], args[i]);
  return tensors;
}

const argument = (spec) => `argument \`${spec.name}\``;

function decodeArg(spec, arg) {
  const info = dtypeInfo(spec.dtype);
  if (arg?.dtype !== info.wit) {
    throw SdkError.invalidArgument(`${argument(spec)}: expected ${spec.dtype === "bytes" ? "string" : spec.dtype}, got ${witDtypeName(arg?.dtype)}`);
  }
  const shape = shapeNumbers(arg.shape ?? []);
  for (let d = 0; d < shape.length; d++) {
    if (!Number.isSafeInteger(shape[d])) throw SdkError.invalidArgument(`${argument(spec)}: a dimension is too large`);
  }
  const count = elementCount(shape);
  if (count === undefined) throw SdkError.invalidArgument(`${argument(spec)}: shape ${formatShape(shape)} has too many elements`);
  if (!shapeMatches(spec.shape, shape)) {
    throw SdkError.invalidArgument(`${argument(spec)}: expected shape ${formatShape(spec.shape)}, got ${formatShape(shape)}`);
  }
  if (!isA(arg.data, Uint8Array)) throw SdkError.invalidArgument(`${argument(spec)}: data must be a Uint8Array, got ${describe(arg.data)}`);
  let data;
  try {
    data = decodeAs(info, arg.data, count);
  } catch (e) {
    if (e instanceof CodecError) throw SdkError.invalidArgument(`${argument(spec)}: ${e.message}`);
    throw e;
  }
  return { dtype: spec.dtype, shape, data };
}

// The returned value as one tensor per declared output, each checked and encoded.
function encodeOutputs(method, specs, returned) {
  let tensors;
  if (specs.length === 1) tensors = [returned];
  else if (Array.isArray(returned)) tensors = returned;
  else if (returned !== null && typeof returned === "object") tensors = specs.map((s) => returned[s.name]);
  else tensors = [];
  if (tensors.length !== specs.length) {
    throw SdkError.internal(`method ${method} returned ${Array.isArray(returned) ? returned.length : describe(returned)} outputs, but declares ${specs.length}`);
  }
  const encoded = new Array(specs.length);
  for (let i = 0; i < specs.length; i++) encoded[i] = encodeOutput(method, specs[i], tensors[i]);
  return encoded;
}

const returned = (method, spec) => `method ${method} returned output \`${spec.name}\``;

function encodeOutput(method, spec, tensor) {
  if (tensor === null || typeof tensor !== "object" || !("data" in tensor)) {
    throw SdkError.internal(`${returned(method, spec)} as ${describe(tensor)}; return a tensor { data, shape }`);
  }
  if (tensor.dtype !== undefined && tensor.dtype !== spec.dtype) {
    throw SdkError.internal(`${returned(method, spec)} of dtype ${tensor.dtype}, but declares ${spec.dtype}`);
  }
  const length = tensor.data?.length;
  // `shape` may be left out for a 1-D result.
  const shape = tensor.shape === undefined ? [length] : shapeNumbers(tensor.shape);
  for (let d = 0; d < shape.length; d++) {
    if (!Number.isSafeInteger(shape[d]) || shape[d] < 0) {
      throw SdkError.internal(`${returned(method, spec)} with shape ${JSON.stringify(tensor.shape)}; dimensions are integers ≥ 0`);
    }
  }
  if (!shapeMatches(spec.shape, shape)) {
    throw SdkError.internal(`${returned(method, spec)} of shape ${formatShape(shape)}, but declares ${formatShape(spec.shape)}`);
  }
  if (elementCount(shape) !== length) {
    throw SdkError.internal(`${returned(method, spec)}: shape ${formatShape(shape)} holds ${elementCount(shape)} elements, got ${length ?? describe(tensor.data)}`);
  }
  let data;
  try {
    data = encodeAs(spec.dtype, dtypeInfo(spec.dtype), tensor.data);
  } catch (e) {
    if (e instanceof CodecError || e instanceof TypeError || e instanceof RangeError) {
      throw SdkError.internal(`${returned(method, spec)}: ${e.message}`);
    }
    throw e;
  }
  return { dtype: dtypeInfo(spec.dtype).wit, shape: witDims(shape), data };
}
