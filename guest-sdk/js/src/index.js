// @wasmrpc/guest: write wasmrpc tensor functions in JavaScript. Declare methods with `fn`, export
// them with `exportMethods` as the `method` interface of the `tensor-function` world (wit/), and build
// the module into a component with componentize-js. See README.md.

export { fn, exportMethods } from "./method.js";
export { SdkError, ERROR_CODES, toWitError } from "./errors.js";
export { DTYPES } from "./dtypes.js";
