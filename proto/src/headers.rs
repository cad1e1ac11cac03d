//! The HTTP header names and media types of the wire contract, spelled once.

/// The header a client names itself in; the server shows it in logs and counts it in metrics.
pub const CLIENT_NAME: &str = "x-wasmrpc-client";

/// The header an internal error's request id travels in, so a user can quote it to an operator
/// who finds the same id in the server's log.
pub const REQUEST_ID: &str = "x-request-id";

/// The media type of the JSON bodies of the v1 API.
pub const JSON: &str = "application/json";

/// The media type of an uploaded component.
pub const WASM: &str = "application/wasm";

/// The canonical code of a failed `/v2` call (`NOT_FOUND`, `DEADLINE_EXCEEDED`…), beside the
/// protocol's `{"error": "..."}` body, which has no room for it.
pub const CODE: &str = "x-wasmrpc-code";

/// The binary tensor data extension's header: the length of the JSON header at the start of an
/// infer request or response body, binary tensor data following it.
pub const INFERENCE_HEADER_CONTENT_LENGTH: &str = "inference-header-content-length";

/// The media type of a body that carries binary tensor data.
pub const OCTET_STREAM: &str = "application/octet-stream";
