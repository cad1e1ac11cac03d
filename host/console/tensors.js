// Tensors as a person types them: nested JSON arrays (`[[1, 2], [3, 4]]`), checked against an
// input's dtype and shape as they are typed, and turned into the v1 API's JSON tensors. The
// server checks everything again; these checks only say what is wrong before a round trip.

const INT_RANGES = {
  int8: [-128, 127], int16: [-32768, 32767], int32: [-2147483648, 2147483647],
  uint8: [0, 255], uint16: [0, 65535], uint32: [0, 4294967295],
  int64: [-(2n ** 63n), 2n ** 63n - 1n], uint64: [0n, 2n ** 64n - 1n],
};
const FLOAT_MAX = { float16: 65504, bfloat16: 3.3895313892515355e38, float32: 3.4028234663852886e38, float64: Number.MAX_VALUE };

/** The shape a spec asks for, as people write it: `any rank`, `[]` (a scalar), `[-1, 3]`. */
export function shapeText(shape) {
  if (shape === null || shape === undefined) return "any shape";
  if (shape.length === 0) return "scalar";
  return `[${shape.map((d) => (d < 0 ? "?" : d)).join(", ")}]`;
}

/** A value to start from for input `index` of `spec`: 1, 2 … scaled by 10 per input. */
export function sample(spec, index) {
  const dims = spec.shape === null || spec.shape === undefined ? [2] : spec.shape.map((d) => (d < 0 ? 2 : d));
  let counter = 0;
  const scale = 10 ** index;
  const element = () => {
    counter += 1;
    switch (spec.dtype) {
      case "string": return ["hello", "world", "wasm", "rpc"][(counter - 1) % 4];
      case "bool": return counter % 2 === 1;
      default: return counter * scale;
    }
  };
  const build = (level) => {
    if (level === dims.length) return element();
    return Array.from({ length: dims[level] }, () => build(level + 1));
  };
  return JSON.stringify(build(0));
}

/**
 * Parse `text` for `spec`: `{tensor}` (the v1 JSON tensor) or `{error}` (what is wrong, said
 * for a person).
 */
export function parse(text, spec) {
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return { error: "not valid JSON: write a number, or nested lists like [[1, 2], [3, 4]]" };
  }
  const shape = [];
  const data = [];
  const shapeError = walk(value, 0, shape, data);
  if (shapeError) return { error: shapeError };
  const mismatch = shapeMismatch(shape, spec.shape);
  if (mismatch) return { error: mismatch };
  for (let i = 0; i < data.length; i++) {
    const problem = elementProblem(data[i], spec.dtype);
    if (problem) return { error: `element ${i}: ${problem}` };
  }
  return { tensor: { dtype: spec.dtype, shape, data } };
}

function walk(value, depth, shape, data) {
  if (Array.isArray(value)) {
    if (shape.length === depth) shape.push(value.length);
    else if (shape.length < depth || shape[depth] !== value.length) return "the lists are not rectangular (rows of different lengths, or a number beside a list)";
    for (const item of value) {
      const error = walk(item, depth + 1, shape, data);
      if (error) return error;
    }
    return null;
  }
  if (shape.length !== depth) return "the lists are not rectangular (a number where a list was expected)";
  data.push(value);
  return null;
}

function shapeMismatch(shape, expected) {
  if (expected === null || expected === undefined) return null;
  if (shape.length !== expected.length) {
    return `this input takes ${expected.length === 0 ? "a scalar" : `${expected.length} dimension(s), ${shapeText(expected)}`}; got shape [${shape.join(", ")}]`;
  }
  for (let i = 0; i < shape.length; i++) {
    if (expected[i] >= 0 && expected[i] !== shape[i]) {
      return `dimension ${i} must be ${expected[i]}; got shape [${shape.join(", ")}]`;
    }
  }
  return null;
}

function elementProblem(x, dtype) {
  if (dtype === "string") return typeof x === "string" ? null : "expected a string in quotes";
  if (dtype === "bool") return typeof x === "boolean" ? null : "expected true or false";
  if (typeof x !== "number") return `expected a number for ${dtype}`;
  if (dtype in FLOAT_MAX) {
    return Math.abs(x) <= FLOAT_MAX[dtype] ? null : `${x} is out of range for ${dtype}`;
  }
  if (!Number.isInteger(x)) return `${x} is not a whole number (${dtype})`;
  const [lo, hi] = INT_RANGES[dtype] || [];
  if (lo === undefined) return null;
  if (typeof lo === "bigint") {
    // Beyond 2^53 JSON numbers are rounded by the browser already; the server checks exactly.
    return BigInt(x) < lo || BigInt(x) > hi ? `${x} is out of range for ${dtype}` : null;
  }
  return x < lo || x > hi ? `${x} is out of range for ${dtype} (${lo} to ${hi})` : null;
}

/** The numbers of an answer tensor (strings and bools as they are), row-major. */
export function values(tensor) {
  if (Array.isArray(tensor.data)) return tensor.data;
  if (typeof tensor.data_b64 === "string") return [`(${atob(tensor.data_b64).length} raw bytes)`];
  return [];
}
