//! The KServe v2 (Triton) model repository and statistics extensions' messages: the repository
//! index, the load request (a component sent base64 in a `file:` parameter, as tritonclient's
//! `load_model(name, config=..., files={"file:1/model.wasm": bytes})` sends it) and the
//! statistics answer.
//!
//! ```
//! use wasmrpc_proto::kserve_repository::decode_load_request;
//! let body = br#"{"parameters": {
//!     "config": "{\"parameters\": {\"export\": {\"string_value\": \"add\"}}}",
//!     "file:1/model.wasm": "AGFzbQ0AAQA="}}"#;
//! let request = decode_load_request(body).unwrap();
//! let file = request.file.unwrap();
//! assert_eq!(file.parameter, "file:1/model.wasm");
//! assert_eq!(file.bytes, b"\0asm\x0d\0\x01\0");
//! assert_eq!(request.export.as_deref(), Some("add"));
//! ```

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::value::RawValue;

/// What a `file:` parameter's value must be, for error messages.
pub const FILE_ENCODING: &str = "base64, standard alphabet (`+` and `/`), padding optional";

/// The prefix of a load request's parameters that carry files.
pub const FILE_PREFIX: &str = "file:";

/// One entry of `POST /v2/repository/index`, Triton's shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RepositoryIndexEntry {
    /// The model's (method's) name.
    pub name: String,
    /// Its newest version.
    pub version: String,
    /// `READY`: everything registered is loaded.
    pub state: String,
    /// Why the model is in that state; empty when it is ready.
    pub reason: String,
}

/// The optional body of `POST /v2/repository/index`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct IndexRequest {
    /// Only the models ready for inference (every registered model is).
    #[serde(default)]
    pub ready: Option<bool>,
}

/// Why a repository request's body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepositoryRequestError {
    /// The body is not the request (not JSON, not an object, wrong types).
    #[error("the body is not a valid {what} request: {why}")]
    Body {
        /// Which request.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A parameter is not what it should be.
    #[error("parameter `{name}`: {why}")]
    Parameter {
        /// The parameter's name.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// More than one `file:` parameter: which one is the component is not guessed.
    #[error(
        "the load request has {} `file:` parameters ({}); send the component in exactly one",
        .0.len(),
        .0.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    SeveralFiles(Vec<String>),
}

/// A non-empty body must be a JSON object (serde would also take a struct from an array).
fn check_object(body: &[u8], what: &'static str) -> Result<(), RepositoryRequestError> {
    if body.trim_ascii_start().starts_with(b"{") {
        Ok(())
    } else {
        Err(RepositoryRequestError::Body {
            what,
            why: "expected a JSON object".into(),
        })
    }
}

/// Decode the optional body of `POST /v2/repository/index`: empty, or `{"ready": bool}`.
///
/// # Errors
/// [`RepositoryRequestError::Body`] when the body is not empty and not such an object.
///
/// ```
/// use wasmrpc_proto::kserve_repository::decode_index_request;
/// assert_eq!(decode_index_request(b"").unwrap().ready, None);
/// assert_eq!(decode_index_request(br#"{"ready": true}"#).unwrap().ready, Some(true));
/// assert!(decode_index_request(br#"{"ready": "yes"}"#).is_err());
/// assert!(decode_index_request(b"[]").is_err());
/// ```
pub fn decode_index_request(body: &[u8]) -> Result<IndexRequest, RepositoryRequestError> {
    if body.trim_ascii().is_empty() {
        return Ok(IndexRequest::default());
    }
    check_object(body, "repository index")?;
    serde_json::from_slice(body).map_err(|e| RepositoryRequestError::Body {
        what: "repository index",
        why: e.to_string(),
    })
}

/// The component of a load request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadFile {
    /// The parameter it came in (`file:1/model.wasm`).
    pub parameter: String,
    /// The component's bytes, decoded.
    pub bytes: Vec<u8>,
}

/// A decoded `POST /v2/repository/models/{name}/load` (or `…/unload`) body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadRequest {
    /// The component, from the one `file:` parameter.
    pub file: Option<LoadFile>,
    /// The method of the component to register, from the `config` parameter's
    /// `parameters.export.string_value`.
    pub export: Option<String>,
}

#[derive(serde::Deserialize)]
struct RawLoadRequest<'a> {
    #[serde(borrow, default)]
    parameters: Option<BTreeMap<String, &'a RawValue>>,
}

/// The `config` parameter, a Triton model configuration in JSON: only its `parameters.export`
/// is read.
#[derive(serde::Deserialize)]
struct RawConfig {
    #[serde(default)]
    parameters: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StringValue {
    string_value: String,
}

/// A JSON string, borrowed from the body when it has no escapes.
fn json_string(raw: &RawValue) -> Option<Cow<'_, str>> {
    if let Ok(s) = serde_json::from_str::<&str>(raw.get()) {
        return Some(Cow::Borrowed(s));
    }
    serde_json::from_str::<String>(raw.get())
        .ok()
        .map(Cow::Owned)
}

/// Decode a load request: empty, or `{"parameters": {...}}` where one `file:` parameter may carry
/// the component (base64) and `config` a Triton model configuration (a JSON string) whose
/// `parameters.export.string_value` chooses the component's method. Other parameters, and other
/// fields of the body and of the configuration, are accepted and not used.
///
/// # Errors
/// [`RepositoryRequestError::Body`] when the body is not such an object,
/// [`RepositoryRequestError::Parameter`] for a `file:` parameter that is not base64 or a `config`
/// that is not a JSON object with a well-formed `export`,
/// [`RepositoryRequestError::SeveralFiles`] for more than one `file:` parameter.
pub fn decode_load_request(body: &[u8]) -> Result<LoadRequest, RepositoryRequestError> {
    if body.trim_ascii().is_empty() {
        return Ok(LoadRequest::default());
    }
    check_object(body, "model load")?;
    let raw: RawLoadRequest<'_> =
        serde_json::from_slice(body).map_err(|e| RepositoryRequestError::Body {
            what: "model load",
            why: e.to_string(),
        })?;
    let parameters = raw.parameters.unwrap_or_default();
    let files: Vec<&String> = parameters
        .keys()
        .filter(|k| k.starts_with(FILE_PREFIX))
        .collect();
    if files.len() > 1 {
        return Err(RepositoryRequestError::SeveralFiles(
            files.into_iter().cloned().collect(),
        ));
    }
    let file = match files.first() {
        None => None,
        Some(&name) => {
            let invalid = |why: String| RepositoryRequestError::Parameter {
                name: name.clone(),
                why,
            };
            let text = json_string(parameters[name]).ok_or_else(|| {
                invalid(format!(
                    "must be a string: the component's bytes, {FILE_ENCODING}"
                ))
            })?;
            let bytes = BASE64
                .decode(text.as_bytes())
                .map_err(|e| invalid(format!("is not {FILE_ENCODING}: {e}")))?;
            Some(LoadFile {
                parameter: name.clone(),
                bytes,
            })
        }
    };
    let export = match parameters.get("config") {
        None => None,
        Some(raw) => config_export(raw)?,
    };
    Ok(LoadRequest { file, export })
}

/// Check the optional body of `POST /v2/repository/models/{name}/unload`: empty, or an object
/// whose `parameters` (tritonclient sends `unload_dependents`) have nothing to act on here.
///
/// # Errors
/// [`RepositoryRequestError::Body`] when the body is not empty and not such an object.
///
/// ```
/// use wasmrpc_proto::kserve_repository::decode_unload_request;
/// assert!(decode_unload_request(b"").is_ok());
/// assert!(decode_unload_request(br#"{"parameters": {"unload_dependents": false}}"#).is_ok());
/// assert!(decode_unload_request(b"[]").is_err());
/// ```
pub fn decode_unload_request(body: &[u8]) -> Result<(), RepositoryRequestError> {
    #[derive(serde::Deserialize)]
    struct RawUnload {
        #[serde(default, rename = "parameters")]
        _parameters: Option<BTreeMap<String, serde::de::IgnoredAny>>,
    }
    if body.trim_ascii().is_empty() {
        return Ok(());
    }
    check_object(body, "model unload")?;
    serde_json::from_slice::<RawUnload>(body)
        .map(drop)
        .map_err(|e| RepositoryRequestError::Body {
            what: "model unload",
            why: e.to_string(),
        })
}

const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// The export a `config` parameter chooses, if any.
fn config_export(raw: &RawValue) -> Result<Option<String>, RepositoryRequestError> {
    let text = json_string(raw).ok_or_else(|| RepositoryRequestError::Parameter {
        name: "config".into(),
        why: "must be a string holding the model configuration as JSON".into(),
    })?;
    export_of_config(&text)
}

/// The method a load request's `config` parameter (a Triton model configuration as JSON text)
/// chooses, in its `parameters.export.string_value`, if any: how HTTP and gRPC loads alike pick
/// one method of a multi-method component.
///
/// # Errors
/// [`RepositoryRequestError::Parameter`] for a `config` that is not a JSON object, or whose
/// `export` is not `{"string_value": "METHOD"}`.
///
/// ```
/// use wasmrpc_proto::kserve_repository::export_of_config;
/// let config = r#"{"parameters": {"export": {"string_value": "add"}}}"#;
/// assert_eq!(export_of_config(config).unwrap().as_deref(), Some("add"));
/// assert_eq!(export_of_config("{}").unwrap(), None);
/// assert!(export_of_config("not json").is_err());
/// ```
pub fn export_of_config(config: &str) -> Result<Option<String>, RepositoryRequestError> {
    let invalid = |why: String| RepositoryRequestError::Parameter {
        name: "config".into(),
        why,
    };
    let config: RawConfig = serde_json::from_str(config)
        .map_err(|e| invalid(format!("is not a JSON model configuration object: {e}")))?;
    let Some(export) = config.parameters.and_then(|mut p| p.remove("export")) else {
        return Ok(None);
    };
    let chosen: StringValue = serde_json::from_value(export).map_err(|e| {
        invalid(format!(
            "`parameters.export` must be {{\"string_value\": \"METHOD\"}}: {e}"
        ))
    })?;
    Ok(Some(chosen.string_value))
}

/// A count and the total time it took, in nanoseconds (Triton's `StatisticDuration`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatisticDuration {
    /// How many.
    pub count: u64,
    /// Their summed duration, in nanoseconds.
    pub ns: u64,
}

/// The inference statistics wasmrpc measures: successful and failed calls. Triton's `queue` and
/// `compute_*` breakdowns are not measured separately, so they are absent rather than invented.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InferStatistics {
    /// Calls that succeeded, and their summed duration.
    pub success: StatisticDuration,
    /// Calls that failed, and their summed duration.
    pub fail: StatisticDuration,
}

/// The statistics of one model version (Triton's `ModelStatistics`, without what is not
/// measured).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelStatistics {
    /// The model's name.
    pub name: String,
    /// The version.
    pub version: String,
    /// When its last call ended, in milliseconds since the Unix epoch; 0 for none.
    pub last_inference: u64,
    /// Successful calls (each call is one inference: no batching).
    pub inference_count: u64,
    /// Successful calls (each inference is one execution).
    pub execution_count: u64,
    /// Successful and failed calls, and their durations.
    pub inference_stats: InferStatistics,
}

/// `GET /v2/models[/{name}[/versions/{v}]]/stats`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelStatsResponse {
    /// One entry per model version.
    pub model_stats: Vec<ModelStatistics>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(body: &str) -> Result<LoadRequest, RepositoryRequestError> {
        decode_load_request(body.as_bytes())
    }

    #[test]
    fn an_empty_load_has_no_file() {
        for body in ["", "  \n", "{}", r#"{"parameters": {}}"#] {
            assert_eq!(load(body).unwrap(), LoadRequest::default(), "{body:?}");
        }
    }

    #[test]
    fn the_file_parameter_is_base64_with_or_without_padding_and_escapes() {
        for body in [
            r#"{"parameters": {"file:1/model.wasm": "AGFzbQ=="}}"#,
            r#"{"parameters": {"file:1/model.wasm": "AGFzbQ"}}"#,
            r#"{"parameters": {"file:1/model.wasm": "AGFz\u0062Q=="}}"#,
        ] {
            let file = load(body).unwrap().file.unwrap();
            assert_eq!(file.bytes, b"\0asm", "{body}");
        }
    }

    #[test]
    fn bad_files_and_configs_are_named() {
        let e = load(r#"{"parameters": {"file:m.wasm": "AG-zbQ=="}}"#).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("parameter `file:m.wasm`: is not base64"),
            "{text}"
        );
        let e = load(r#"{"parameters": {"file:m.wasm": 7}}"#).unwrap_err();
        assert!(e.to_string().contains("must be a string"), "{e}");
        let e = load(r#"{"parameters": {"file:a": "AA==", "file:b": "AA=="}}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the load request has 2 `file:` parameters (`file:a`, `file:b`); send the \
             component in exactly one"
        );
        let e = load(r#"{"parameters": {"config": "not json"}}"#).unwrap_err();
        assert!(e.to_string().starts_with("parameter `config`"), "{e}");
        let e =
            load(r#"{"parameters": {"config": "{\"parameters\": {\"export\": 1}}"}}"#).unwrap_err();
        assert!(e.to_string().contains("string_value"), "{e}");
        for body in ["[1]", "[]", "null", "\"x\""] {
            assert!(
                matches!(load(body).unwrap_err(), RepositoryRequestError::Body { .. }),
                "{body}"
            );
        }
    }

    #[test]
    fn other_parameters_and_config_fields_are_accepted() {
        let r = load(
            r#"{"parameters": {"unload_dependents": false,
                "config": "{\"name\": \"m\", \"max_batch_size\": 0}"}}"#,
        )
        .unwrap();
        assert_eq!(r, LoadRequest::default());
    }
}
