// Errors: the `SdkError` class for explicit WIT error codes, and the one table that turns whatever a
// method throws into a WIT `error` variant ({ tag, val }), which the host maps onto the canonical code
// of the same name (`invalid-argument` becomes INVALID_ARGUMENT, HTTP 400, and so on).

/** The WIT `error` cases, in the order of wit/tensor.wit. */
export const ERROR_CODES = Object.freeze([
  "invalid-argument",
  "failed-precondition",
  "out-of-range",
  "unimplemented",
  "internal",
  "resource-exhausted",
  "not-found",
]);

// Users may write a code as the WIT case (`invalid-argument`) or as the canonical name callers see
// (`INVALID_ARGUMENT`); both mean the same case.
function normalizeCode(code) {
  if (typeof code !== "string") return undefined;
  const kebab = code.toLowerCase().replace(/_/g, "-");
  return ERROR_CODES.includes(kebab) ? kebab : undefined;
}

/**
 * An error with an explicit WIT code: `throw new SdkError("out-of-range", "index 7 of 4")`.
 * The message reaches the caller as written.
 */
export class SdkError extends Error {
  constructor(code, message) {
    const wit = normalizeCode(code);
    if (wit === undefined) {
      // A bad code is a bug in the function; say so rather than guess a code for it.
      throw new TypeError(`SdkError: unknown code ${JSON.stringify(code)}; use one of ${ERROR_CODES.join(", ")}`);
    }
    super(String(message ?? ""));
    this.name = "SdkError";
    this.code = wit;
  }

  static invalidArgument(message) { return new SdkError("invalid-argument", message); }
  static failedPrecondition(message) { return new SdkError("failed-precondition", message); }
  static outOfRange(message) { return new SdkError("out-of-range", message); }
  static unimplemented(message) { return new SdkError("unimplemented", message); }
  static internal(message) { return new SdkError("internal", message); }
  static resourceExhausted(message) { return new SdkError("resource-exhausted", message); }
  static notFound(message) { return new SdkError("not-found", message); }
}

/**
 * The WIT `error` value for anything thrown by a method:
 *
 * | thrown                              | code               | message                 |
 * |-------------------------------------|--------------------|-------------------------|
 * | `SdkError(code, msg)`               | `code`             | `msg`                   |
 * | `TypeError`, `RangeError`           | `invalid-argument` | `msg`                   |
 * | any other `Error` (incl. SyntaxError, EvalError, InternalError) | `internal` | `Name: msg` |
 * | anything else (`throw "x"`)         | `internal`         | `String(value)`         |
 *
 * `context`, when given, is put before the message (`method matmul: ...`) only for `internal`, where
 * the caller otherwise has no hint of where the bug is.
 */
/** What SpiderMonkey (componentize-js's engine) throws when an allocation fails. */
const OUT_OF_MEMORY = "out of memory";

export function toWitError(thrown, context) {
  if (thrown instanceof SdkError) return { tag: thrown.code, val: thrown.message };
  // SpiderMonkey reports an allocation it could not make (the call's memory cap reached) by
  // throwing this string, not an Error: it is the caller's request that was too big, as Python's
  // MemoryError is.
  if (thrown === OUT_OF_MEMORY) {
    return { tag: "resource-exhausted", val: context ? `${context}: ran out of memory` : "ran out of memory" };
  }
  if (thrown instanceof TypeError || thrown instanceof RangeError) {
    return { tag: "invalid-argument", val: String(thrown.message) };
  }
  let message;
  if (thrown instanceof Error) message = `${thrown.name}: ${thrown.message}`;
  else message = `a method threw a non-Error value: ${safeString(thrown)}`;
  return { tag: "internal", val: context ? `${context}: ${message}` : message };
}

// String() itself can throw (an object whose toString throws, or Object.create(null)).
function safeString(value) {
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}
