// The console's only way to the server: the public HTTP API, with the tab's key when there is
// one. The key lives in sessionStorage (this tab only, gone when it closes), never in a cookie,
// so no other site's page can make a request that carries it.

const KEY_SLOT = "wasmrpc.key";

/** An answer that was not a success: the canonical code, the server's message, the HTTP status. */
export class ApiError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

export function key() {
  return sessionStorage.getItem(KEY_SLOT);
}

export function setKey(value) {
  if (value) sessionStorage.setItem(KEY_SLOT, value);
  else sessionStorage.removeItem(KEY_SLOT);
}

/** Ask for a key (set by main.js): resolves when the user gave one. */
let askForKey = async () => false;
export function onKeyNeeded(ask) {
  askForKey = ask;
}

/**
 * A request to the API. `body` is sent as is (a string of JSON, or the bytes of a component).
 * Answers the parsed JSON (or the text, with `{text: true}`); throws ApiError otherwise. A 401
 * asks for a key and tries again with it.
 */
export async function request(method, path, { body, type, text = false, signal } = {}) {
  for (;;) {
    const headers = { "x-wasmrpc-client": "console" };
    if (type) headers["content-type"] = type;
    const k = key();
    if (k) headers.authorization = `Bearer ${k}`;
    let response;
    try {
      response = await fetch(path, { method, headers, body, signal });
    } catch (e) {
      if (e.name === "AbortError") throw e;
      throw new ApiError("UNAVAILABLE", `the server did not answer (${e.message})`, 0);
    }
    // Asked again after a refused key, until the person gives up (closes the prompt).
    if (response.status === 401 && (await askForKey(k !== null))) continue;
    if (response.ok) return text ? response.text() : response.json();
    throw await errorOf(response);
  }
}

async function errorOf(response) {
  const raw = await response.text();
  const headerCode = response.headers.get("x-wasmrpc-code");
  try {
    const parsed = JSON.parse(raw);
    const error = parsed.error;
    if (error && typeof error === "object") {
      return new ApiError(error.code, error.message, response.status);
    }
    if (typeof error === "string") {
      return new ApiError(headerCode || "UNKNOWN", error, response.status);
    }
  } catch {
    // Not JSON: fall through to the text itself.
  }
  return new ApiError(headerCode || "UNKNOWN", raw || response.statusText, response.status);
}

export const api = {
  methods: () => request("GET", "/v1/methods"),
  method: (name, version) =>
    request("GET", `/v1/methods/${encodeURIComponent(name)}${version ? `?version=${version}` : ""}`),
  call: (name, version, args, timeoutMs) =>
    request("POST", `/v1/methods/${encodeURIComponent(name)}/call${version ? `?version=${version}` : ""}`, {
      body: JSON.stringify({ args, timeout_ms: timeoutMs }),
      type: "application/json",
    }),
  register: (name, bytes, exportName) =>
    request("PUT", `/v1/methods/${encodeURIComponent(name)}${exportName ? `?export=${encodeURIComponent(exportName)}` : ""}`, {
      body: bytes,
      type: "application/wasm",
    }),
  deleteMethod: (name) => request("DELETE", `/v1/methods/${encodeURIComponent(name)}`),
  deleteVersion: (name, version) =>
    request("DELETE", `/v1/methods/${encodeURIComponent(name)}?version=${version}`),
  metrics: () => request("GET", "/metrics", { text: true }),
  workers: () => request("GET", "/v1/cluster/workers"),
  tenants: () => request("GET", "/v1/tenants"),
  ready: () => request("GET", "/readyz"),
};
