//! Tensors as JSON: `{"dtype": "int32", "shape": [2, 2], "data": [1, 2, 3, 4]}`.
//!
//! Parsing is strict because a silent rounding is a wrong answer: every value must fit its dtype,
//! floats must be finite unless spelled `"NaN"`, `"Infinity"` or `"-Infinity"`, and the count must
//! match the shape. `data` may be flat or nested; `data_b64` may carry the raw little-endian bytes.
//! The shape is never trusted to size an allocation: the element count is bounded by the text.
//!
//! A call request is decoded in one pass ([`decode_call_request`]): each argument goes straight
//! into its tensor, and a `data` array is read where it lies in the body, never copied as text.
//! The requests clients commonly send are read by `one_pass`, which checks the JSON and reads the
//! numbers in the same walk; everything else, and every error, goes through serde.

use std::borrow::Cow;
use std::cell::Cell;

use base64::Engine as _;
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde_json::value::RawValue;

use crate::dtype::DType;
use crate::messages::CallRequest;
use crate::tensor::{MAX_RANK, Tensor, TensorError, element_count, push_string, split_strings};

mod float32;
mod one_pass;

/// How deep a nested `data` array may go; deeper is refused before any value is read.
///
/// ```
/// use wasmrpc_proto::{Tensor, json::MAX_DATA_NESTING};
/// let deep = format!(r#"{{"dtype":"int8","shape":[1],"data":{}1{}}}"#,
///                    "[".repeat(MAX_DATA_NESTING + 1), "]".repeat(MAX_DATA_NESTING + 1));
/// assert!(Tensor::from_json(&deep).is_err());
/// ```
pub const MAX_DATA_NESTING: usize = 64;

impl Tensor {
    /// Parse one tensor from its JSON text, validating every value.
    ///
    /// # Errors
    /// A [`TensorError`] saying what is wrong: malformed JSON, a negative or overflowing shape, a
    /// count that does not match the shape, a value that does not fit the dtype.
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// let t = Tensor::from_json(r#"{"dtype":"float32","shape":[2],"data":[0.5,"NaN"]}"#).unwrap();
    /// assert!(t.to_vec::<f32>().unwrap()[1].is_nan());
    /// assert!(Tensor::from_json(r#"{"dtype":"float32","shape":[1],"data":[1e39]}"#).is_err());
    /// ```
    pub fn from_json(text: &str) -> Result<Self, TensorError> {
        let failed = Failure::default();
        let mut de = serde_json::Deserializer::from_str(text);
        let result = DeserializeSeed::deserialize(TensorSeed { failed: &failed }, &mut de)
            .and_then(|t| de.end().map(|()| t));
        result.map_err(|e| {
            failed
                .take()
                .unwrap_or_else(|| TensorError::Value(format!("not a tensor: {e}")))
        })
    }
}

/// Why a call request body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallRequestError {
    /// The body is not a call request at all (not JSON, wrong structure, unknown fields).
    #[error("{0}")]
    Body(String),
    /// One argument is not a valid tensor (its dtype, shape or a value).
    #[error("argument {index}: {error}")]
    Argument {
        /// The argument's position.
        index: usize,
        /// What is wrong with it.
        error: TensorError,
    },
}

/// Decode the body of `POST /v1/methods/{name}/call` in one pass: the body is parsed once, each
/// argument straight into its tensor (a `data` array is read in place, never copied), every value
/// checked on the way.
///
/// # Errors
/// [`CallRequestError::Body`] when the body is not a call request, and
/// [`CallRequestError::Argument`] naming the first argument that is not a valid tensor.
///
/// ```
/// use wasmrpc_proto::json::{CallRequestError, decode_call_request};
/// let body = br#"{"args":[{"dtype":"int32","shape":[2],"data":[1,2]}],"timeout_ms":5}"#;
/// let request = decode_call_request(body).unwrap();
/// assert_eq!((request.args.len(), request.timeout_ms), (1, 5));
///
/// let bad = br#"{"args":[{"dtype":"int8","shape":[1],"data":[1]},{"dtype":"int8","shape":[1],"data":[300]}]}"#;
/// match decode_call_request(bad).unwrap_err() {
///     CallRequestError::Argument { index, error } => {
///         assert_eq!(index, 1);
///         assert_eq!(error.to_string(), "element 0: 300 is out of range for int8");
///     }
///     other => panic!("{other}"),
/// }
/// assert!(matches!(decode_call_request(b"{\"args\": 5}"), Err(CallRequestError::Body(_))));
/// ```
pub fn decode_call_request(body: &[u8]) -> Result<CallRequest, CallRequestError> {
    one_pass::decode(body).or_else(|one_pass::Unsure| decode_with_serde(body))
}

/// Whether the one-pass reader and the serde path agree on `body`: either the reader leaves it
/// to serde, or both accept it with the same request. For the fuzz target; not an API.
#[doc(hidden)]
pub fn one_pass_agrees_with_serde(body: &[u8]) -> bool {
    match one_pass::decode(body) {
        Err(one_pass::Unsure) => true,
        Ok(fast) => decode_with_serde(body)
            .is_ok_and(|slow| fast.timeout_ms == slow.timeout_ms && fast.args == slow.args),
    }
}

/// [`decode_call_request`] through serde: every request, and every error's wording.
fn decode_with_serde(body: &[u8]) -> Result<CallRequest, CallRequestError> {
    let failed = ArgumentFailure::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    let result = DeserializeSeed::deserialize(CallRequestSeed { failed: &failed }, &mut de)
        .and_then(|r| de.end().map(|()| r));
    result.map_err(|e| match failed.take() {
        Some((index, error)) => CallRequestError::Argument { index, error },
        None => CallRequestError::Body(e.to_string()),
    })
}

/// Where a tensor visitor leaves its own error (serde's error type can only carry text).
type Failure = Cell<Option<TensorError>>;
type ArgumentFailure = Cell<Option<(usize, TensorError)>>;

struct CallRequestSeed<'f> {
    failed: &'f ArgumentFailure,
}

impl<'de> DeserializeSeed<'de> for CallRequestSeed<'_> {
    type Value = CallRequest;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<CallRequest, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for CallRequestSeed<'_> {
    type Value = CallRequest;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(r#"a call request {"args": [tensor, ...], "timeout_ms": N}"#)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CallRequest, A::Error> {
        let mut args = None;
        let mut timeout_ms = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "args" if args.is_none() => {
                    args = Some(map.next_value_seed(ArgsSeed {
                        failed: self.failed,
                    })?);
                }
                "timeout_ms" if timeout_ms.is_none() => timeout_ms = Some(map.next_value()?),
                "args" | "timeout_ms" => {
                    return Err(A::Error::custom(format!("duplicate field `{key}`")));
                }
                other => return Err(A::Error::unknown_field(other, &["args", "timeout_ms"])),
            }
        }
        Ok(CallRequest {
            args: args.ok_or_else(|| A::Error::missing_field("args"))?,
            timeout_ms: timeout_ms.unwrap_or(0),
        })
    }
}

struct ArgsSeed<'f> {
    failed: &'f ArgumentFailure,
}

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_> {
    type Value = Vec<Tensor>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<Tensor>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ArgsSeed<'_> {
    type Value = Vec<Tensor>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of tensors")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Tensor>, A::Error> {
        // Arguments are few; the hint comes from the client, so it only bounds a small reservation.
        let mut args = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(16));
        let failed = Failure::default();
        loop {
            match seq.next_element_seed(TensorSeed { failed: &failed }) {
                Ok(Some(t)) => args.push(t),
                Ok(None) => return Ok(args),
                Err(e) => {
                    if let Some(error) = failed.take() {
                        self.failed.set(Some((args.len(), error)));
                    }
                    return Err(e);
                }
            }
        }
    }
}

/// Reads one tensor object; a tensor-level mistake is left in `failed` (the caller turns it into
/// a [`TensorError`]); serde's own errors (bad JSON) pass through as they are.
struct TensorSeed<'f> {
    failed: &'f Failure,
}

impl TensorSeed<'_> {
    fn fail<E: serde::de::Error>(&self, error: TensorError) -> E {
        let text = error.to_string();
        self.failed.set(Some(error));
        E::custom(text)
    }
}

impl<'de> DeserializeSeed<'de> for TensorSeed<'_> {
    type Value = Tensor;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Tensor, D::Error> {
        d.deserialize_map(self)
    }
}

const TENSOR_FIELDS: &[&str] = &["name", "dtype", "shape", "data", "data_b64"];

impl<'de> Visitor<'de> for TensorSeed<'_> {
    type Value = Tensor;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(r#"a tensor {"dtype": ..., "shape": [...], "data": [...]}"#)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tensor, A::Error> {
        let mut dtype: Option<DType> = None;
        let mut shape: Option<Vec<i64>> = None;
        let mut data: Option<&'de RawValue> = None;
        let mut data_b64: Option<Cow<'de, str>> = None;
        let mut seen_name = false;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let duplicate = match &*key {
                // Accepted for KServe-style inputs; the position decides, not the name.
                "name" => {
                    std::mem::replace(&mut seen_name, true) || {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        false
                    }
                }
                "dtype" => {
                    dtype.is_some() || {
                        let name = map.next_value::<Cow<'de, str>>()?;
                        let parsed = name
                            .parse::<DType>()
                            .map_err(|e| self.fail(TensorError::Value(e.to_string())))?;
                        dtype = Some(parsed);
                        false
                    }
                }
                "shape" => {
                    shape.is_some() || {
                        shape = Some(map.next_value_seed(ShapeSeed {
                            failed: Some(self.failed),
                        })?);
                        false
                    }
                }
                "data" => {
                    data.is_some() || {
                        data = Some(map.next_value()?);
                        false
                    }
                }
                "data_b64" => {
                    data_b64.is_some() || {
                        data_b64 = Some(map.next_value()?);
                        false
                    }
                }
                other => {
                    let e: A::Error = A::Error::unknown_field(other, TENSOR_FIELDS);
                    return Err(self.fail(TensorError::Value(e.to_string())));
                }
            };
            if duplicate {
                return Err(self.fail(TensorError::Value(format!("duplicate field `{key}`"))));
            }
        }
        let missing = |field: &str| TensorError::Value(format!("missing field `{field}`"));
        let dtype = dtype.ok_or_else(|| self.fail(missing("dtype")))?;
        let shape = shape.ok_or_else(|| self.fail(missing("shape")))?;
        build_tensor(dtype, shape, data.map(RawValue::get), data_b64.as_deref())
            .map_err(|e| self.fail(e))
    }
}

/// Reads a JSON shape (a list of integers) and stops at its first dimension past [`MAX_RANK`],
/// so that a shape of megabytes costs no more than 65 dimensions. The refusal is left in
/// `failed` when there is one.
pub(crate) struct ShapeSeed<'f> {
    pub(crate) failed: Option<&'f Failure>,
}

impl<'de> DeserializeSeed<'de> for ShapeSeed<'_> {
    type Value = Vec<i64>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<i64>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ShapeSeed<'_> {
    type Value = Vec<i64>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a shape: a list of integers")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<i64>, A::Error> {
        let mut dims = Vec::new();
        while let Some(d) = seq.next_element::<i64>()? {
            if dims.len() == MAX_RANK {
                let error = TensorError::Rank { rank: MAX_RANK + 1 };
                let text = error.to_string();
                if let Some(failed) = self.failed {
                    failed.set(Some(error));
                }
                return Err(A::Error::custom(text));
            }
            dims.push(d);
        }
        Ok(dims)
    }
}

/// A `shape` field read with [`ShapeSeed`] (for `#[serde(deserialize_with)]`).
pub(crate) fn bounded_shape<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<i64>, D::Error> {
    ShapeSeed { failed: None }.deserialize(d)
}

/// A tensor from its parsed fields, every value checked.
pub(crate) fn build_tensor(
    dtype: DType,
    shape: Vec<i64>,
    data: Option<&str>,
    data_b64: Option<&str>,
) -> Result<Tensor, TensorError> {
    crate::tensor::check_rank(shape.len())?;
    if shape.iter().any(|&d| d < 0) {
        return Err(TensorError::NegativeDimension { shape });
    }
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let count = element_count(&shape)?;
    match (data, data_b64) {
        (Some(_), Some(_)) => Err(TensorError::Value(
            "give either `data` or `data_b64`, not both".into(),
        )),
        (None, None) => Err(TensorError::Value(
            "a tensor needs `data` or `data_b64`".into(),
        )),
        (None, Some(b64)) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .map_err(|e| TensorError::Value(format!("`data_b64` is not base64: {e}")))?;
            Tensor::from_raw(dtype, shape, bytes)
        }
        (Some(data), None) => {
            let mut encoder = Encoder::new(dtype, count, data.len());
            for_each_scalar(data, |s| encoder.push(s))?;
            if encoder.count != count {
                return Err(TensorError::ElementCount {
                    shape,
                    expected: count,
                    actual: encoder.count,
                });
            }
            Tensor::from_raw(dtype, shape, encoder.out)
        }
    }
}

/// One leaf of a JSON `data` array, as text.
enum Scalar<'a> {
    Number(&'a str),
    Bool(bool),
    /// A JSON string literal, quotes and escapes included.
    Str(&'a str),
    Null,
}

/// Walk the leaves of a (possibly nested) JSON array of scalars, or a bare scalar.
///
/// The text is already valid JSON (serde checked it), so this only needs to find token edges.
fn for_each_scalar(
    text: &str,
    mut f: impl FnMut(Scalar<'_>) -> Result<(), TensorError>,
) -> Result<(), TensorError> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut depth = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' | b',' => i += 1,
            b'[' => {
                depth += 1;
                if depth > MAX_DATA_NESTING {
                    return Err(TensorError::Value(format!(
                        "`data` is nested more than {MAX_DATA_NESTING} deep"
                    )));
                }
                i += 1;
            }
            b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'{' => {
                return Err(TensorError::Value(
                    "`data` holds an object; elements must be numbers, booleans or strings".into(),
                ));
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                f(Scalar::Str(&text[start..i.min(text.len())]))?;
            }
            b't' => {
                f(Scalar::Bool(true))?;
                i += 4;
            }
            b'f' => {
                f(Scalar::Bool(false))?;
                i += 5;
            }
            b'n' => {
                f(Scalar::Null)?;
                i += 4;
            }
            _ => {
                let start = i;
                while i < bytes.len()
                    && !matches!(bytes[i], b',' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                {
                    i += 1;
                }
                f(Scalar::Number(&text[start..i]))?;
            }
        }
    }
    Ok(())
}

/// Turns JSON scalars into little-endian bytes of one dtype, checking each value.
struct Encoder {
    dtype: DType,
    expected: u64,
    count: u64,
    out: Vec<u8>,
}

impl Encoder {
    fn new(dtype: DType, expected: u64, text_len: usize) -> Self {
        // The text bounds the element count (each takes at least 2 bytes with its comma), so a huge
        // shape cannot make us allocate more than the request itself.
        let per = dtype.size().unwrap_or(4) as u64;
        let bound = (text_len as u64 / 2 + 1).min(expected);
        let capacity = usize::try_from(bound.saturating_mul(per)).unwrap_or(0);
        Encoder {
            dtype,
            expected,
            count: 0,
            out: Vec::with_capacity(capacity),
        }
    }

    fn push(&mut self, scalar: Scalar<'_>) -> Result<(), TensorError> {
        self.count += 1;
        if self.count > self.expected {
            // Stop at the first value too many rather than reading a huge array to the end.
            return Err(TensorError::Value(format!(
                "more values in `data` than the shape's {} elements",
                self.expected
            )));
        }
        let index = self.count - 1;
        let dtype = self.dtype;
        let bad = |what: &str| TensorError::Value(format!("element {index}: {what}"));
        match (dtype, scalar) {
            (DType::Bool, Scalar::Bool(b)) => self.out.push(u8::from(b)),
            (DType::String, Scalar::Str(lit)) => {
                let s: String = serde_json::from_str(lit).map_err(|e| bad(&e.to_string()))?;
                push_string(&mut self.out, s.as_bytes());
            }
            (DType::Float32, Scalar::Number(n)) => {
                // The nearest f32 to the text (`float32.rs`): never through a rounded f64.
                let v: f32 = one_pass::nearest_f32(n)
                    .ok_or_else(|| bad(&format!("`{n}` is not a number")))?;
                if !v.is_finite() {
                    return Err(bad(&format!("{n} is out of range for {dtype}")));
                }
                self.out.extend_from_slice(&v.to_le_bytes());
            }
            (d, Scalar::Number(n)) if d.is_float() => {
                let v: f64 = n
                    .parse()
                    .map_err(|_| bad(&format!("`{n}` is not a number")))?;
                self.push_float(v, n).map_err(|m| bad(&m))?;
            }
            (d, Scalar::Str(lit)) if d.is_float() => {
                let v = match lit {
                    "\"NaN\"" | "\"nan\"" => f64::NAN,
                    "\"Infinity\"" | "\"inf\"" => f64::INFINITY,
                    "\"-Infinity\"" | "\"-inf\"" => f64::NEG_INFINITY,
                    _ => return Err(bad(&format!("{lit} is not a {dtype} value"))),
                };
                self.push_float_unchecked(v);
            }
            (d, Scalar::Number(n)) if d != DType::Bool && d != DType::String => {
                self.push_int(n).map_err(|m| bad(&m))?;
            }
            (_, Scalar::Null) => return Err(bad(&format!("null is not a {dtype} value"))),
            (_, Scalar::Bool(b)) => return Err(bad(&format!("{b} is not a {dtype} value"))),
            (_, Scalar::Number(n)) => return Err(bad(&format!("{n} is not a {dtype} value"))),
            (_, Scalar::Str(s)) => return Err(bad(&format!("{s} is not a {dtype} value"))),
        }
        Ok(())
    }

    /// A float32 value read by the one-pass reader; `None` (nothing pushed) when it is one too
    /// many or not finite, which the serde path then words as an error.
    fn push_float32(&mut self, v: f32) -> Option<()> {
        if self.count >= self.expected || !v.is_finite() {
            return None;
        }
        self.count += 1;
        self.out.extend_from_slice(&v.to_le_bytes());
        Some(())
    }

    fn push_float(&mut self, v: f64, text: &str) -> Result<(), String> {
        let finite = match self.dtype {
            DType::Float64 => v.is_finite(),
            DType::Float32 => (v as f32).is_finite(),
            DType::Float16 => half::f16::from_f64(v).is_finite(),
            _ => half::bf16::from_f64(v).is_finite(),
        };
        if !finite {
            return Err(format!("{text} is out of range for {}", self.dtype));
        }
        self.push_float_unchecked(v);
        Ok(())
    }

    fn push_float_unchecked(&mut self, v: f64) {
        match self.dtype {
            DType::Float64 => self.out.extend_from_slice(&v.to_le_bytes()),
            DType::Float32 => self.out.extend_from_slice(&(v as f32).to_le_bytes()),
            DType::Float16 => self
                .out
                .extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            _ => self
                .out
                .extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
        }
    }

    fn push_int(&mut self, text: &str) -> Result<(), String> {
        let out_of_range = || format!("{text} is out of range for {}", self.dtype);
        let v: i128 = if text.contains(['.', 'e', 'E']) {
            // Some clients write every number as a float (`1.0`); a whole number is taken
            // exactly as its integer, anything with a fractional part is refused.
            match whole_number(text) {
                WholeNumber::Exactly(v) => v,
                WholeNumber::TooLarge => return Err(out_of_range()),
                WholeNumber::Fractional => {
                    return Err(format!("{text} is not an integer, as {} needs", self.dtype));
                }
            }
        } else {
            text.parse().map_err(|_| out_of_range())?
        };
        macro_rules! put {
            ($t:ty) => {
                self.out.extend_from_slice(
                    &<$t>::try_from(v).map_err(|_| out_of_range())?.to_le_bytes(),
                )
            };
        }
        match self.dtype {
            DType::UInt8 => put!(u8),
            DType::UInt16 => put!(u16),
            DType::UInt32 => put!(u32),
            DType::UInt64 => put!(u64),
            DType::Int8 => put!(i8),
            DType::Int16 => put!(i16),
            DType::Int32 => put!(i32),
            _ => put!(i64),
        }
        Ok(())
    }
}

/// What a JSON number written with a fraction or an exponent stands for, as an integer.
#[derive(Debug, PartialEq, Eq)]
enum WholeNumber {
    Exactly(i128),
    TooLarge,
    Fractional,
}

/// `1.0`, `-2.50e1` and `3e2` are the whole numbers 1, -25 and 300; `1.5` and `1e-1` are not.
/// Worked out on the decimal digits, so no float rounding can make a fraction look whole.
fn whole_number(text: &str) -> WholeNumber {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.trim_start_matches('+')),
        None => (unsigned, "0"),
    };
    let (int_digits, frac_digits) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = [int_digits, frac_digits].concat();
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return WholeNumber::Exactly(0);
    }
    let Ok(exponent) = exponent.parse::<i64>() else {
        // An exponent past i64 is far past any integer dtype, or far below 1.
        return if exponent.starts_with('-') {
            WholeNumber::Fractional
        } else {
            WholeNumber::TooLarge
        };
    };
    let scale = exponent.saturating_sub(frac_digits.len() as i64);
    let integer = if scale >= 0 {
        // Saturating: an exponent near i64::MAX must not wrap round to a small number.
        if (digits.len() as i64).saturating_add(scale) > 39 {
            return WholeNumber::TooLarge;
        }
        format!("{digits}{}", "0".repeat(scale as usize))
    } else {
        let cut = scale.unsigned_abs();
        if cut >= digits.len() as u64 {
            return WholeNumber::Fractional;
        }
        let (whole, fraction) = digits.split_at(digits.len() - cut as usize);
        if fraction.bytes().any(|b| b != b'0') {
            return WholeNumber::Fractional;
        }
        whole.to_string()
    };
    match integer.parse::<i128>() {
        Ok(v) if negative => WholeNumber::Exactly(-v),
        Ok(v) => WholeNumber::Exactly(v),
        Err(_) => WholeNumber::TooLarge,
    }
}

/// Reads the JSON form from a deserializer that lends its input (`serde_json::from_slice` or
/// `from_str`): `data` is read in place.
impl<'de> serde::Deserialize<'de> for Tensor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let failed = Failure::default();
        TensorSeed { failed: &failed }.deserialize(d)
    }
}

impl serde::Serialize for Tensor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let strings = match self.dtype() {
            DType::String => {
                Some(split_strings(self.raw_data()).map_err(serde::ser::Error::custom)?)
            }
            _ => None,
        };
        // Non-UTF-8 strings cannot be JSON strings; such a tensor travels as `data_b64` instead.
        let utf8 = strings
            .as_ref()
            .is_none_or(|v| v.iter().all(|e| std::str::from_utf8(e).is_ok()));
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("dtype", &self.dtype())?;
        map.serialize_entry("shape", self.shape())?;
        if utf8 {
            map.serialize_entry(
                "data",
                &DataView {
                    tensor: self,
                    strings: strings.as_deref(),
                },
            )?;
        } else {
            let b64 = base64::engine::general_purpose::STANDARD.encode(self.raw_data());
            map.serialize_entry("data_b64", &b64)?;
        }
        map.end()
    }
}

struct DataView<'a> {
    tensor: &'a Tensor,
    strings: Option<&'a [&'a [u8]]>,
}

/// A tensor's elements as one flat JSON array (the v2 protocol's `data`); `bytes` elements as
/// strings, with invalid UTF-8 replaced (binary tensor data carries them exactly).
pub(crate) struct FlatData<'a> {
    tensor: &'a Tensor,
    strings: Option<Vec<std::borrow::Cow<'a, str>>>,
}

impl<'a> FlatData<'a> {
    /// # Errors
    /// A `bytes` tensor whose elements are malformed.
    pub(crate) fn new<E: serde::ser::Error>(tensor: &'a Tensor) -> Result<Self, E> {
        let strings = match tensor.dtype() {
            DType::String => Some(
                split_strings(tensor.raw_data())
                    .map_err(E::custom)?
                    .into_iter()
                    .map(String::from_utf8_lossy)
                    .collect(),
            ),
            _ => None,
        };
        Ok(FlatData { tensor, strings })
    }
}

impl serde::Serialize for FlatData<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.strings {
            Some(strings) => s.collect_seq(strings),
            None => DataView {
                tensor: self.tensor,
                strings: None,
            }
            .serialize(s),
        }
    }
}

impl serde::Serialize for DataView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.tensor;
        let data = t.raw_data();
        let mut seq = s.serialize_seq(None)?;
        macro_rules! ints {
            ($t:ty) => {
                for c in data.chunks_exact(std::mem::size_of::<$t>()) {
                    seq.serialize_element(&<$t>::from_le_bytes(c.try_into().unwrap()))?;
                }
            };
        }
        match t.dtype() {
            DType::Bool => {
                for &b in data {
                    seq.serialize_element(&(b != 0))?;
                }
            }
            DType::UInt8 => ints!(u8),
            DType::UInt16 => ints!(u16),
            DType::UInt32 => ints!(u32),
            DType::UInt64 => ints!(u64),
            DType::Int8 => ints!(i8),
            DType::Int16 => ints!(i16),
            DType::Int32 => ints!(i32),
            DType::Int64 => ints!(i64),
            DType::Float16 => {
                for c in data.chunks_exact(2) {
                    seq.serialize_element(&Float32(
                        half::f16::from_le_bytes([c[0], c[1]]).to_f32(),
                    ))?;
                }
            }
            DType::BFloat16 => {
                for c in data.chunks_exact(2) {
                    seq.serialize_element(&Float32(
                        half::bf16::from_le_bytes([c[0], c[1]]).to_f32(),
                    ))?;
                }
            }
            DType::Float32 => {
                for c in data.chunks_exact(4) {
                    seq.serialize_element(&Float32(f32::from_le_bytes(c.try_into().unwrap())))?;
                }
            }
            DType::Float64 => {
                for c in data.chunks_exact(8) {
                    seq.serialize_element(&Float64(f64::from_le_bytes(c.try_into().unwrap())))?;
                }
            }
            DType::String => {
                for e in self.strings.unwrap_or_default() {
                    seq.serialize_element(std::str::from_utf8(e).unwrap_or_default())?;
                }
            }
        }
        seq.end()
    }
}

/// An f32 written in its shortest form (`0.1`, not `0.10000000149011612`); non-finite as a string.
struct Float32(f32);
/// An f64 written as a number, or as `"NaN"`/`"Infinity"`/`"-Infinity"` when not finite.
struct Float64(f64);

fn non_finite_name(v: f64) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

impl serde::Serialize for Float32 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_finite() {
            s.serialize_f32(self.0)
        } else {
            s.serialize_str(non_finite_name(f64::from(self.0)))
        }
    }
}

impl serde::Serialize for Float64 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_finite() {
            s.serialize_f64(self.0)
        } else {
            s.serialize_str(non_finite_name(self.0))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn whole_numbers_written_as_floats_are_their_integers_exactly() {
        use super::{WholeNumber::*, whole_number};
        for (text, expected) in [
            ("1.0", Exactly(1)),
            ("-2.50e1", Exactly(-25)),
            ("3e2", Exactly(300)),
            ("3E+2", Exactly(300)),
            ("100e-2", Exactly(1)),
            ("0.0", Exactly(0)),
            ("-0.0e5", Exactly(0)),
            ("9007199254740993.0", Exactly(9_007_199_254_740_993)),
            ("1.5", Fractional),
            ("0.10", Fractional),
            ("1e-1", Fractional),
            ("1e-99999999999999999999", Fractional),
            ("1e40", TooLarge),
            ("1e99999999999999999999", TooLarge),
            // Found by the fuzzer: an exponent of i64::MAX overflowed the digit count.
            ("2222222225555555555550E9223372036854775807", TooLarge),
        ] {
            assert_eq!(whole_number(text), expected, "{text}");
        }
        let t = crate::Tensor::from_json(
            r#"{"dtype": "int8", "shape": [3], "data": [1.0, -1e2, 127.00]}"#,
        )
        .unwrap();
        assert_eq!(t.to_vec::<i8>().unwrap(), vec![1, -100, 127]);
        let e = crate::Tensor::from_json(r#"{"dtype": "int8", "shape": [1], "data": [1.28e2]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("out of range for int8"), "{e}");
        let e = crate::Tensor::from_json(r#"{"dtype": "uint8", "shape": [1], "data": [2.5]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("not an integer"), "{e}");
    }

    use super::*;

    fn parse(text: &str) -> Result<Tensor, TensorError> {
        Tensor::from_json(text)
    }

    #[test]
    fn flat_and_nested_data_parse_alike() {
        let flat = parse(r#"{"dtype":"int32","shape":[2,2],"data":[1,2,3,4]}"#).unwrap();
        let nested = parse(r#"{"dtype":"int32","shape":[2,2],"data":[[1,2],[3,4]]}"#).unwrap();
        assert_eq!(flat, nested);
        assert_eq!(flat.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn a_float32_is_rounded_once_from_its_decimal_text() {
        // Just below the midpoint between two f32s: rounded once, it goes down; through f64 it
        // would land on the midpoint first and then round to the even neighbour, above.
        let text = "1.000000178813934326171874";
        let direct: f32 = text.parse().unwrap();
        assert_ne!(
            direct,
            (text.parse::<f64>().unwrap()) as f32,
            "the case rounds twice"
        );
        let t = parse(&format!(
            r#"{{"dtype":"float32","shape":[1],"data":[{text}]}}"#
        ))
        .unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap()[0].to_bits(), direct.to_bits());
    }

    #[test]
    fn values_that_do_not_fit_are_refused() {
        for (dtype, value) in [
            ("float32", "1e39"),
            ("float64", "1e400"),
            ("int32", "2147483648"),
            ("uint8", "-1"),
            ("int64", "1.5"),
            ("float16", "70000"),
        ] {
            let text = format!(r#"{{"dtype":"{dtype}","shape":[1],"data":[{value}]}}"#);
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(value), "{dtype} {value}: {err}");
        }
    }

    #[test]
    fn count_mismatch_and_bad_shapes_are_refused() {
        let err = parse(r#"{"dtype":"int32","shape":[2,4],"data":[1,2,3,4,5,6,7]}"#).unwrap_err();
        assert!(err.to_string().contains("needs 8 elements, got 7"), "{err}");
        let err = parse(r#"{"dtype":"int32","shape":[-2],"data":[]}"#).unwrap_err();
        assert!(matches!(err, TensorError::NegativeDimension { .. }));
        let huge = r#"{"dtype":"int32","shape":[4294967296,4294967296,16],"data":[1]}"#;
        assert!(matches!(
            parse(huge).unwrap_err(),
            TensorError::ShapeOverflow { .. }
        ));
        let big = r#"{"dtype":"int32","shape":[1000000000000],"data":[1]}"#;
        assert!(matches!(
            parse(big).unwrap_err(),
            TensorError::ElementCount { .. }
        ));
    }

    #[test]
    fn too_many_values_stop_the_parse() {
        let err = parse(r#"{"dtype":"int32","shape":[1],"data":[1,2]}"#).unwrap_err();
        assert!(err.to_string().contains("more values"), "{err}");
    }

    /// A shape of `rank` ones, then `tail` (JSON or not) in place of the closing bracket.
    fn long_shape_body(rank: usize, tail: &str) -> String {
        let dims = vec!["1"; rank].join(",");
        format!(r#"{{"args":[{{"dtype":"uint8","shape":[{dims}{tail}"#)
    }

    #[test]
    fn shapes_past_the_rank_limit_are_refused_at_their_65th_dimension() {
        for rank in [MAX_RANK + 1, 100_000, 1_000_000] {
            let body = long_shape_body(rank, r#"],"data":[1]}]}"#);
            match decode_call_request(body.as_bytes()) {
                Err(CallRequestError::Argument {
                    index: 0,
                    error: TensorError::Rank { rank: 65 },
                }) => {}
                other => panic!("rank {rank}: {other:?}"),
            }
            let tensor = &body[r#"{"args":["#.len()..body.len() - 2];
            let err = Tensor::from_json(tensor).unwrap_err();
            assert!(matches!(err, TensorError::Rank { rank: 65 }), "{err}");
            assert!(err.to_string().len() < 200, "{err}");
        }
        // The parse stops there: what follows the 65th dimension is never read, even when it is
        // not JSON at all.
        let broken = long_shape_body(MAX_RANK + 1, ",1,@@@ not json");
        assert!(matches!(
            decode_call_request(broken.as_bytes()),
            Err(CallRequestError::Argument {
                error: TensorError::Rank { rank: 65 },
                ..
            })
        ));
        // 64 is fine, both ways.
        let widest = long_shape_body(MAX_RANK, r#"],"data":[1]}]}"#);
        assert_eq!(
            decode_call_request(widest.as_bytes()).unwrap().args[0]
                .shape()
                .len(),
            64
        );
        assert!(one_pass_agrees_with_serde(widest.as_bytes()));
    }

    #[test]
    fn messages_print_long_shapes_cut_short() {
        let shape: Vec<u64> = (1..=MAX_RANK as u64).collect();
        let err = Tensor::from_vec(shape, vec![1u8]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "shape [1, 2, 3, 4, …, 64] (rank 64) has more elements than can be addressed"
        );
        let err = Tensor::from_vec(vec![1u64; 40], vec![1u8, 2]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "shape [1, 1, 1, 1, …, 1] (rank 40) needs 1 elements, got 2"
        );
    }

    #[test]
    fn non_finite_floats_round_trip_as_strings() {
        let t = Tensor::from_vec([3], vec![f32::NAN, f32::INFINITY, 0.1]).unwrap();
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(
            text,
            r#"{"dtype":"float32","shape":[3],"data":["NaN","Infinity",0.1]}"#
        );
        let back = parse(&text).unwrap().to_vec::<f32>().unwrap();
        assert!(back[0].is_nan() && back[1] == f32::INFINITY && back[2] == 0.1);
    }

    #[test]
    fn strings_and_bytes_round_trip() {
        let t = parse(r#"{"dtype":"string","shape":[2],"data":["héllo","a\"b"]}"#).unwrap();
        assert_eq!(t.to_strings().unwrap()[1], b"a\"b");
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(parse(&text).unwrap(), t);
        let bin = Tensor::from_strings([1], [[0xffu8, 0xfe]]).unwrap();
        let text = serde_json::to_string(&bin).unwrap();
        assert!(text.contains("data_b64"), "{text}");
        assert_eq!(parse(&text).unwrap(), bin);
    }

    #[test]
    fn scalars_and_b64_parse() {
        let t = parse(r#"{"dtype":"float64","shape":[],"data":2.5}"#).unwrap();
        assert_eq!(t.to_vec::<f64>().unwrap(), vec![2.5]);
        let t = parse(r#"{"dtype":"int16","shape":[2],"data_b64":"AQACAA=="}"#).unwrap();
        assert_eq!(t.to_vec::<i16>().unwrap(), vec![1, 2]);
        assert!(parse(r#"{"dtype":"int16","shape":[3],"data_b64":"AQACAA=="}"#).is_err());
    }

    #[test]
    fn a_call_request_decodes_in_any_key_order() {
        let body = br#"{"timeout_ms":7,"args":[{"data":[[1,2],[3,4]],"shape":[2,2],"name":"a","dtype":"int32"}]}"#;
        let request = decode_call_request(body).unwrap();
        assert_eq!(request.timeout_ms, 7);
        assert_eq!(
            request.args,
            vec![Tensor::from_vec([2, 2], vec![1i32, 2, 3, 4]).unwrap()]
        );
        assert_eq!(
            decode_call_request(br#"{"args":[]}"#).unwrap().timeout_ms,
            0
        );
    }

    #[test]
    fn a_call_request_names_the_argument_that_fails() {
        let body = br#"{"args":[{"dtype":"uint8","shape":[1],"data":[1]},{"dtype":"uint8","shape":[2],"data":[1]}]}"#;
        let err = decode_call_request(body).unwrap_err();
        assert_eq!(
            err,
            CallRequestError::Argument {
                index: 1,
                error: TensorError::ElementCount {
                    shape: vec![2],
                    expected: 2,
                    actual: 1
                }
            }
        );
        let unknown = br#"{"args":[{"dtype":"int4","shape":[1],"data":[1]}]}"#;
        match decode_call_request(unknown).unwrap_err() {
            CallRequestError::Argument { index: 0, error } => {
                assert!(
                    error.to_string().contains("unknown dtype `int4`"),
                    "{error}"
                )
            }
            other => panic!("{other:?}"),
        }
        let twice = br#"{"args":[{"dtype":"int8","dtype":"int8","shape":[1],"data":[1]}]}"#;
        assert!(matches!(
            decode_call_request(twice),
            Err(CallRequestError::Argument { index: 0, .. })
        ));
    }

    #[test]
    fn a_body_that_is_not_a_call_request_is_a_body_error() {
        for body in [
            &b"not json"[..],
            br#"{"args": 5}"#,
            br#"{"args": [], "extra": 1}"#,
            br#"{"timeout_ms": 1}"#,
            br#"{"args": []} trailing"#,
            br#"{"args": [], "args": []}"#,
            br#"{"args": [{"dtype":"int8","shape":[1],"data":[1,]}]}"#,
        ] {
            assert!(
                matches!(decode_call_request(body), Err(CallRequestError::Body(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn every_dtype_round_trips() {
        for dtype in DType::ALL {
            let data = if dtype == DType::String {
                r#"["x","y"]"#
            } else if dtype == DType::Bool {
                "[true,false]"
            } else if dtype.is_float() {
                "[1.5,-2.0]"
            } else {
                "[1,2]"
            };
            let text = format!(r#"{{"dtype":"{dtype}","shape":[2],"data":{data}}}"#);
            let t = parse(&text).unwrap();
            assert_eq!(t.dtype(), dtype);
            assert_eq!(serde_json::to_string(&t).unwrap(), text);
        }
    }
}
