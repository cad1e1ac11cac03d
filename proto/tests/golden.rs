//! The golden wire examples in `tests/golden/` (see its README): canonical files round-trip to
//! the same bytes, accepted spellings read as their canonical form, refused input fails with the
//! listed message, and the code table matches [`Code`].

use std::path::{Path, PathBuf};

use serde_json::Value;
use wasmrpc_proto::{
    CallRequest, CallResponse, Code, DeleteResponse, ErrorBody, MethodInfo, MethodList, Tensor,
    tensor_list,
};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(golden_dir().join("manifest.json")).expect("manifest");
    serde_json::from_str(&text).expect("manifest is JSON")
}

fn entries<'a>(manifest: &'a Value, section: &str) -> &'a [Value] {
    manifest[section]
        .as_array()
        .unwrap_or_else(|| panic!("manifest has no `{section}` list"))
}

fn read(entry: &Value) -> (String, String) {
    let file = entry["file"].as_str().expect("entry names a file");
    let text = std::fs::read_to_string(golden_dir().join(file))
        .unwrap_or_else(|e| panic!("reading {file}: {e}"));
    (file.to_owned(), text.trim_end_matches('\n').to_owned())
}

/// Parse `text` as the message `kind` names and write it back; `Err` carries the parse error.
fn round_trip(kind: &str, text: &str) -> Result<String, String> {
    fn via<T: serde::de::DeserializeOwned + serde::Serialize>(
        text: &str,
    ) -> Result<String, String> {
        let value: T = serde_json::from_str(text).map_err(|e| e.to_string())?;
        Ok(serde_json::to_string(&value).expect("serialise"))
    }
    match kind {
        "tensor" => Tensor::from_json(text)
            .map(|t| serde_json::to_string(&t).expect("serialise"))
            .map_err(|e| e.to_string()),
        "call_request" => via::<CallRequest>(text),
        "call_response" => via::<CallResponse>(text),
        "delete_response" => via::<DeleteResponse>(text),
        "error" => via::<ErrorBody>(text),
        "method_info" => via::<MethodInfo>(text),
        "method_list" => via::<MethodList>(text),
        other => panic!("unknown kind `{other}` in the manifest"),
    }
}

#[test]
fn canonical_examples_round_trip_byte_for_byte() {
    let manifest = manifest();
    let list = entries(&manifest, "canonical");
    assert!(list.len() >= 20, "only {} canonical examples", list.len());
    for entry in list {
        let (file, text) = read(entry);
        let kind = entry["kind"].as_str().expect("kind");
        let written = round_trip(kind, &text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(written, text, "{file} does not round-trip");
    }
}

#[test]
fn every_dtype_has_a_canonical_tensor() {
    let manifest = manifest();
    let files: Vec<String> = entries(&manifest, "canonical")
        .iter()
        .map(|e| read(e).1)
        .collect();
    for dtype in wasmrpc_proto::DType::ALL {
        let needle = format!(r#""dtype":"{dtype}""#);
        assert!(
            files.iter().any(|t| t.contains(&needle)),
            "no canonical example of {dtype}"
        );
    }
}

#[test]
fn accepted_spellings_read_as_their_canonical_form() {
    let manifest = manifest();
    for entry in entries(&manifest, "accepted") {
        let (file, text) = read(entry);
        let kind = entry["kind"].as_str().expect("kind");
        let canonical = entry["canonical"].as_str().expect("canonical");
        let written = round_trip(kind, &text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(written, canonical, "{file}");
    }
}

#[test]
fn refused_input_fails_with_its_message() {
    let manifest = manifest();
    let list = entries(&manifest, "refused");
    assert!(list.len() >= 15, "only {} refused examples", list.len());
    for entry in list {
        let (file, text) = read(entry);
        let kind = entry["kind"].as_str().expect("kind");
        let message = entry["message"].as_str().expect("message");
        match round_trip(kind, &text) {
            Ok(written) => panic!("{file} was accepted as {written}"),
            Err(e) => assert!(e.contains(message), "{file}: {e:?} lacks {message:?}"),
        }
    }
}

#[test]
fn the_code_table_matches_the_codes() {
    let manifest = manifest();
    let table = entries(&manifest, "codes");
    assert_eq!(table.len(), Code::ALL.len());
    for (row, code) in table.iter().zip(Code::ALL) {
        assert_eq!(row["code"].as_str(), Some(code.as_str()));
        assert_eq!(row["number"].as_u64(), Some(u64::from(code.number())));
        assert_eq!(row["http"].as_u64(), Some(u64::from(code.http_status())));
    }
}

/// The binary tensor list workers send each other (`tensor_list`): each golden message reads as
/// its tensors and they encode to the same bytes, and each damaged one is refused saying why.
#[test]
fn tensor_lists_between_workers_read_and_write_their_golden_bytes() {
    let manifest = manifest();
    let list = entries(&manifest, "tensor_lists");
    assert!(list.len() >= 3, "only {} tensor lists", list.len());
    for entry in list {
        let file = entry["file"].as_str().expect("entry names a file");
        let bytes = std::fs::read(golden_dir().join(file)).expect("golden bytes");
        let expected: Vec<Tensor> = entry["tensors"]
            .as_array()
            .expect("tensors")
            .iter()
            .map(|t| Tensor::from_json(&t.to_string()).expect("a golden tensor"))
            .collect();
        let read = tensor_list::decode(&bytes::Bytes::from(bytes.clone()))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(read, expected, "{file}");
        assert_eq!(
            &tensor_list::encode(&expected).unwrap()[..],
            &bytes[..],
            "{file}"
        );
    }
    for entry in entries(&manifest, "tensor_lists_refused") {
        let file = entry["file"].as_str().expect("entry names a file");
        let message = entry["message"].as_str().expect("message");
        let bytes = std::fs::read(golden_dir().join(file)).expect("golden bytes");
        match tensor_list::decode(&bytes::Bytes::from(bytes)) {
            Ok(t) => panic!("{file} was read as {t:?}"),
            Err(e) => assert!(
                e.to_string().contains(message),
                "{file}: {e} lacks {message:?}"
            ),
        }
    }
}
