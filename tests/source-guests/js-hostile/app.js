// A hostile JavaScript guest: each method tries something the sandbox must stop or refuse, and the
// ones that can observe their failure report it as a string, so tests/e2e/js_guests.rs can check
// that the attempt failed inside the guest while the call itself answered cleanly. Built with
// `wasmrpc build` (componentize-js, its default WASI imports: http, clocks, filesystem, ...).

import { fn, exportMethods } from "@wasmrpc/guest";

const said = (text) => ({ data: [text], shape: [] });
const scalar = ["float32", []];

export const method = exportMethods({
  spin: fn({ args: { x: scalar }, returns: scalar, doc: "Never returns: the deadline must end it." }, () => {
    for (;;) {}
  }),

  grow: fn({ args: { x: scalar }, returns: scalar, doc: "Keeps 1 MiB arrays until memory runs out." }, () => {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
  }),

  fetch_url: fn(
    { args: { url: ["string", []] }, returns: ["string", []], doc: "Tries fetch(url); says what happened." },
    async (url) => {
      try {
        const response = await fetch(url.data[0]);
        return said(`status ${response.status}: ${await response.text()}`);
      } catch (e) {
        return said(`${e.name}: ${e.message}`);
      }
    },
  ),

  environment: fn({ args: { x: scalar }, returns: ["string", []], doc: "What the guest can see of its host." }, () => {
    const seen = {
      process: typeof globalThis.process,
      env: typeof globalThis.process?.env === "object" ? Object.keys(globalThis.process.env) : null,
    };
    return said(JSON.stringify(seen));
  }),

  clock_step: fn(
    {
      args: { x: scalar },
      returns: ["float64", [2]],
      doc: "Smallest non-zero step, in ms, of performance.now() and of Date.now() over ~20 ms of reads.",
    },
    () => {
      const steps = [];
      for (const read of [() => performance.now(), () => Date.now()]) {
        let smallest = 0;
        const start = Date.now();
        let last = read();
        while (Date.now() - start < 20) {
          const now = read();
          if (now !== last) {
            smallest = smallest === 0 ? now - last : Math.min(smallest, now - last);
            last = now;
          }
        }
        steps.push(smallest);
      }
      return { data: steps, shape: [2] };
    },
  ),

  sleep: fn(
    { args: { seconds: scalar }, returns: scalar, doc: "Waits on a timer (in the host, not in wasm): the deadline must end it." },
    async (seconds) => {
      await new Promise((resolve) => setTimeout(resolve, seconds.data[0] * 1000));
      return { data: [seconds.data[0]], shape: [] };
    },
  ),
});
