//! How a registration is stored: a format of its own, with a version number, so the wire types
//! can change without making old data unreadable.
//!
//! A record is JSON (self-describing, so fields can be added with defaults). Format 1 adds
//! `"format": 1` to the layout that stores wrote before there was a number (format 0, read as
//! is); a record of a newer format than this build knows is refused with a message that says so,
//! never misread.

use std::sync::Arc;

use wasmrpc_proto::{DType, Dim, MethodSignature, TensorSpec};

use super::{Digest, Registration, RegistryError};
use crate::tenancy::TenantId;

/// The format this build writes; it reads this one and every older one.
pub const FORMAT: u32 = 1;

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredRegistration {
    /// Absent in records written before formats were numbered: those are format 0.
    #[serde(default)]
    format: u32,
    tenant: String,
    name: String,
    version: u32,
    digest: Digest,
    size: u64,
    created_ms: u64,
    export: String,
    signature: StoredSignature,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredSignature {
    name: String,
    inputs: Vec<StoredSpec>,
    outputs: Vec<StoredSpec>,
    #[serde(default)]
    doc: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredSpec {
    name: String,
    /// The TensorFlow dtype name (`int32`, `string`…).
    dtype: String,
    /// `null` for any rank; `-1` for a dynamic dimension.
    shape: Option<Vec<i64>>,
}

fn unreadable(why: impl std::fmt::Display) -> RegistryError {
    RegistryError::Database(format!("unreadable registration record: {why}"))
}

/// The stored text of `r`, in format [`FORMAT`].
pub fn encode(r: &Registration) -> String {
    let spec = |s: &TensorSpec| StoredSpec {
        name: s.name.clone(),
        dtype: s.dtype.name().to_owned(),
        shape: s.shape.as_ref().map(|dims| {
            dims.iter()
                .map(|d| match d {
                    Dim::Fixed(n) => i64::try_from(*n).unwrap_or(i64::MAX),
                    Dim::Dynamic => -1,
                })
                .collect()
        }),
    };
    let stored = StoredRegistration {
        format: FORMAT,
        tenant: r.tenant.as_str().to_owned(),
        name: r.name.clone(),
        version: r.version,
        digest: r.digest,
        size: r.size,
        created_ms: r.created_ms,
        export: r.export.clone(),
        signature: StoredSignature {
            name: r.signature.name.clone(),
            inputs: r.signature.inputs.iter().map(spec).collect(),
            outputs: r.signature.outputs.iter().map(spec).collect(),
            doc: r.signature.doc.clone(),
        },
    };
    // Plain structs of strings and numbers: serialising them cannot fail.
    serde_json::to_string(&stored).expect("a stored registration serialises")
}

/// A registration from its stored text, of any format up to [`FORMAT`].
///
/// # Errors
/// Text that is not a record, a dtype this build does not know, or a newer format.
pub fn decode(text: &str) -> Result<Arc<Registration>, RegistryError> {
    let stored: StoredRegistration = serde_json::from_str(text).map_err(unreadable)?;
    check_format(stored.format)?;
    let spec = |s: StoredSpec| -> Result<TensorSpec, RegistryError> {
        Ok(TensorSpec {
            dtype: s.dtype.parse::<DType>().map_err(unreadable)?,
            shape: s.shape.map(|dims| {
                dims.into_iter()
                    .map(|d| u64::try_from(d).map_or(Dim::Dynamic, Dim::Fixed))
                    .collect()
            }),
            name: s.name,
        })
    };
    let specs = |list: Vec<StoredSpec>| list.into_iter().map(spec).collect::<Result<Vec<_>, _>>();
    Ok(Arc::new(Registration {
        tenant: TenantId::new(stored.tenant),
        name: stored.name,
        version: stored.version,
        digest: stored.digest,
        size: stored.size,
        created_ms: stored.created_ms,
        export: stored.export,
        signature: MethodSignature {
            name: stored.signature.name,
            inputs: specs(stored.signature.inputs)?,
            outputs: specs(stored.signature.outputs)?,
            doc: stored.signature.doc,
        },
    }))
}

/// Only the digest of a stored record: garbage collection scans every record, and this skips
/// decoding signatures.
///
/// # Errors
/// Text that is not a record, or a newer format.
pub fn decode_digest(text: &str) -> Result<Digest, RegistryError> {
    #[derive(serde::Deserialize)]
    struct DigestOnly {
        #[serde(default)]
        format: u32,
        digest: Digest,
    }
    let d: DigestOnly = serde_json::from_str(text).map_err(unreadable)?;
    check_format(d.format)?;
    Ok(d.digest)
}

fn check_format(format: u32) -> Result<(), RegistryError> {
    if format > FORMAT {
        return Err(RegistryError::Database(format!(
            "a registration is stored in format {format}, written by a newer wasmrpc; this \
             version reads formats up to {FORMAT}: upgrade it to use this data directory"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record exactly as stores wrote it before formats were numbered (taken from
    /// `tests/fixtures/data-dir-format-0`, with a shape added to cover dimensions).
    const FORMAT_0: &str = r#"{"tenant":"default","name":"add","version":2,"digest":"sha256:8bc0714ca53aee76dcdc089bd6ef14586d8494f9055edd58d80561463d657dac","size":126845,"created_ms":1795432739079,"export":"add","signature":{"name":"add","inputs":[{"name":"a","dtype":"int32","shape":null},{"name":"b","dtype":"int32","shape":[-1,3]}],"outputs":[{"name":"output","dtype":"int32","shape":null}],"doc":"Element-wise sum."}}"#;

    #[test]
    fn format_0_records_still_read() {
        let r = decode(FORMAT_0).expect("format 0 reads");
        assert_eq!(r.tenant, TenantId::default_tenant());
        assert_eq!((r.name.as_str(), r.version, r.size), ("add", 2, 126_845));
        assert_eq!(r.created_ms, 1_795_432_739_079);
        assert_eq!(r.signature.inputs[0].shape, None);
        assert_eq!(
            r.signature.inputs[1].shape,
            Some(vec![Dim::Dynamic, Dim::Fixed(3)])
        );
        assert_eq!(r.signature.inputs[1].dtype, DType::Int32);
        assert_eq!(r.signature.doc, "Element-wise sum.");
        assert_eq!(decode_digest(FORMAT_0).expect("digest"), r.digest);
    }

    #[test]
    fn records_are_written_in_the_current_format_and_read_back() {
        let r = decode(FORMAT_0).expect("format 0 reads");
        let text = encode(&r);
        assert!(
            text.starts_with(r#"{"format":1,"tenant":"default","name":"add""#),
            "{text}"
        );
        // Format 1 is format 0 plus the number: the same fields, spelled the same way.
        assert_eq!(text.replacen(r#""format":1,"#, "", 1), FORMAT_0);
        assert_eq!(decode(&text).expect("format 1 reads"), r);
    }

    #[test]
    fn a_newer_format_is_refused_not_misread() {
        let newer = FORMAT_0.replacen('{', r#"{"format":2,"#, 1);
        let err = decode(&newer).unwrap_err().to_string();
        assert!(
            err.contains("format 2") && err.contains("newer wasmrpc"),
            "{err}"
        );
        assert!(decode_digest(&newer).is_err());
    }

    #[test]
    fn garbage_is_unreadable() {
        let err = decode("{}").unwrap_err().to_string();
        assert!(err.contains("unreadable registration record"), "{err}");
        let bad_dtype = FORMAT_0.replacen(r#""dtype":"int32""#, r#""dtype":"int33""#, 1);
        let err = decode(&bad_dtype).unwrap_err().to_string();
        assert!(err.contains("unknown dtype `int33`"), "{err}");
    }
}
