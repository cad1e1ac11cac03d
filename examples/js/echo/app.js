// Every dtype and every error path of the JavaScript SDK inside a real component: `echo_<dtype>`
// returns its argument (decoded to the dtype's array and encoded back), `fail_<code>` throws what
// maps to that code, and `shout` upper-cases strings. guest-sdk/js/component-test/ builds and calls
// it; the same calls through the Rust SDK give the same bytes.

import { fn, exportMethods, SdkError, DTYPES } from "../../../guest-sdk/js/src/index.js";

const methods = {};
for (const dtype of DTYPES) {
  // Copies through a fresh array of the same class, so the data really is decoded and re-encoded.
  methods[`echo_${dtype}`] = fn({ args: { x: dtype }, returns: dtype, doc: `Returns its ${dtype} argument.` }, (x) => ({
    data: Array.isArray(x.data) ? [...x.data] : new x.data.constructor(x.data),
    shape: x.shape,
  }));
}

const THROWN = {
  sdk_out_of_range: () => new SdkError("out-of-range", "index 7 of 4"),
  type_error: () => new TypeError("wants a matrix"),
  range_error: () => new RangeError("k too large"),
  plain_error: () => new Error("a bug"),
  string: () => "not an Error",
};
for (const [name, make] of Object.entries(THROWN)) {
  methods[`fail_${name}`] = fn({ returns: "int8" }, () => {
    throw make();
  });
}

methods.shout = fn({ args: { text: "string" }, returns: "string", doc: "Upper-cases every string." }, (text) => ({
  data: text.data.map((s) => s.toUpperCase()),
  shape: text.shape,
}));

export const method = exportMethods(methods);
