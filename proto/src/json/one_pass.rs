//! The common call request read in one pass over its bytes, the JSON checked on the way.
//!
//! Through serde, a `data` array is read twice: serde_json walks it once to find where it ends
//! (and to check it is JSON), then the tensor decoder walks it again to read the numbers. For a
//! request of a million floats that was half the time (docs/benchmarks.md, row P9). This reader
//! checks the JSON grammar and reads the values in the same walk.
//!
//! It only ever answers for requests it fully understands, and answers exactly what the serde
//! path ([`super::decode_call_request`]) would: a call request whose keys and strings have no
//! escapes, each tensor's `dtype` and `shape` before its `data`, `data` a (possibly nested)
//! array of numbers or booleans, or a number, or `data_b64`. Anything else, and every mistake
//! (bad JSON, a wrong field, a value out of range), is [`Unsure`]: the caller reads the body
//! again through serde, which decides and words the error. So this module never defines what
//! is accepted; a differential test and the fuzz target hold the two paths to the same answers.

use crate::dtype::DType;
use crate::messages::CallRequest;
use crate::tensor::{MAX_RANK, Tensor, element_count};

use super::float32::Decimal;
use super::{Encoder, MAX_DATA_NESTING, Scalar};

/// This reader cannot answer for the body; the serde path must.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unsure;

type Read<T> = Result<T, Unsure>;

/// The call request in `body`, if it is one this reader fully understands and it is valid.
pub(crate) fn decode(body: &[u8]) -> Read<CallRequest> {
    let mut r = Reader { body, at: 0 };
    let request = r.call_request()?;
    r.skip_whitespace();
    if r.at != body.len() {
        return Err(Unsure);
    }
    Ok(request)
}

/// The nearest `f32` to `text`, a JSON number: read as the one-pass reader reads one, with the
/// standard parse where the fast path steps aside. For the serde path's numbers.
pub(crate) fn nearest_f32(text: &str) -> Option<f32> {
    let mut r = Reader {
        body: text.as_bytes(),
        at: 0,
    };
    let fast = match r.number() {
        Ok((_, decimal)) if r.at == text.len() => decimal.to_f32(),
        _ => None,
    };
    fast.or_else(|| text.parse().ok())
}

/// A position in the body.
struct Reader<'b> {
    body: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn peek(&self) -> Option<u8> {
        self.body.get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Consumes `byte` after any whitespace.
    fn expect(&mut self, byte: u8) -> Read<()> {
        self.skip_whitespace();
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(Unsure)
        }
    }

    /// After whitespace: `close` (true: the container ends) or a comma (false), else unsure.
    fn comma_or(&mut self, close: u8) -> Read<bool> {
        self.skip_whitespace();
        match self.peek() {
            Some(b',') => {
                self.at += 1;
                Ok(false)
            }
            Some(b) if b == close => {
                self.at += 1;
                Ok(true)
            }
            _ => Err(Unsure),
        }
    }

    /// Whether the next token (after whitespace) is `close`, which is then consumed: an empty
    /// object or array.
    fn empty(&mut self, close: u8) -> bool {
        self.skip_whitespace();
        let empty = self.peek() == Some(close);
        if empty {
            self.at += 1;
        }
        empty
    }

    /// A string without escapes, as its UTF-8 text.
    fn string(&mut self) -> Read<&'b str> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match self.peek() {
                Some(b'"') => break,
                // Escapes are left to serde; raw control characters are not JSON.
                Some(b'\\' | 0..0x20) | None => return Err(Unsure),
                Some(_) => self.at += 1,
            }
        }
        let text = std::str::from_utf8(&self.body[start..self.at]).map_err(|_| Unsure)?;
        self.at += 1;
        Ok(text)
    }

    /// A JSON number's text, its grammar checked: `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`,
    /// and its value taken apart on the way.
    fn number(&mut self) -> Read<(&'b str, Decimal)> {
        let body = self.body;
        let start = self.at;
        let mut at = start;
        // `exact` is settled once the digits are counted, below.
        let mut decimal = Decimal::default();
        if body.get(at) == Some(&b'-') {
            decimal.negative = true;
            at += 1;
        }
        // Significant digits taken into `decimal.digits` (a leading `0` adds nothing).
        let mut taken = 0;
        match body.get(at) {
            Some(b'0') => at += 1,
            Some(b'1'..=b'9') => {
                let end = digits(body, at, &mut decimal.digits);
                taken += end - at;
                at = end;
            }
            _ => return Err(Unsure),
        }
        if body.get(at) == Some(&b'.') {
            at += 1;
            let end = digits(body, at, &mut decimal.digits);
            if end == at {
                return Err(Unsure);
            }
            decimal.exponent -= (end - at) as i64;
            taken += end - at;
            at = end;
        }
        // Past 19 digits `digits` wrapped: the fast path cannot use this number.
        decimal.exact = taken <= Decimal::MOST_DIGITS;
        if let Some(b'e' | b'E') = body.get(at) {
            at += 1;
            let negative = body.get(at) == Some(&b'-');
            if let Some(b'+' | b'-') = body.get(at) {
                at += 1;
            }
            let mut exponent = 0;
            let end = digits(body, at, &mut exponent);
            match end - at {
                0 => return Err(Unsure),
                // Longer exponents are past what the fast path can use (and may have wrapped).
                1..=3 => {
                    let exponent = exponent as i64;
                    decimal.exponent += if negative { -exponent } else { exponent };
                }
                _ => decimal.exact = false,
            }
            at = end;
        }
        self.at = at;
        // SAFETY: only ASCII bytes (digits, signs, `.`, `e`) were consumed since `start`.
        let text = unsafe { std::str::from_utf8_unchecked(&body[start..at]) };
        Ok((text, decimal))
    }

    /// A JSON integer: no fraction, no exponent (serde refuses those for integer fields).
    fn integer<T: std::str::FromStr>(&mut self) -> Read<T> {
        self.skip_whitespace();
        let (text, _) = self.number()?;
        if text.contains(['.', 'e', 'E']) {
            return Err(Unsure);
        }
        text.parse().map_err(|_| Unsure)
    }

    /// `{"args": [...], "timeout_ms": N}`, in either order, each at most once.
    fn call_request(&mut self) -> Read<CallRequest> {
        let (mut args, mut timeout_ms) = (None, None);
        self.object(|r, key| {
            match key {
                "args" if args.is_none() => args = Some(r.array_of(|r, _| r.tensor())?),
                "timeout_ms" if timeout_ms.is_none() => timeout_ms = Some(r.integer()?),
                _ => return Err(Unsure),
            }
            Ok(())
        })?;
        Ok(CallRequest {
            args: args.ok_or(Unsure)?,
            timeout_ms: timeout_ms.unwrap_or(0),
        })
    }

    /// A JSON array, each element read by `element`.
    fn array_of<T>(
        &mut self,
        mut element: impl FnMut(&mut Self, usize) -> Read<T>,
    ) -> Read<Vec<T>> {
        self.expect(b'[')?;
        let mut elements = Vec::new();
        if self.empty(b']') {
            return Ok(elements);
        }
        loop {
            let read = elements.len();
            elements.push(element(self, read)?);
            if self.comma_or(b']')? {
                return Ok(elements);
            }
        }
    }

    /// A JSON object, each field's value read by `field` (given the key), which refuses keys
    /// it does not take.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'b str) -> Read<()>) -> Read<()> {
        self.expect(b'{')?;
        if self.empty(b'}') {
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            field(self, key)?;
            if self.comma_or(b'}')? {
                return Ok(());
            }
        }
    }

    /// One tensor object; `dtype` and `shape` must come before `data`.
    fn tensor(&mut self) -> Read<Tensor> {
        let (mut dtype, mut shape, mut bytes) = (None, None, None);
        let mut seen_name = false;
        self.object(|r, key| {
            match key {
                "name" if !seen_name => {
                    seen_name = true;
                    r.string()?;
                }
                "dtype" if dtype.is_none() => {
                    dtype = Some(r.string()?.parse::<DType>().map_err(|_| Unsure)?);
                }
                "shape" if shape.is_none() => shape = Some(r.shape()?),
                "data" | "data_b64" if bytes.is_none() => {
                    let (Some(dtype), Some(shape)) = (dtype, shape.as_deref()) else {
                        return Err(Unsure);
                    };
                    bytes = Some(if key == "data" {
                        r.data(dtype, element_count(shape).map_err(|_| Unsure)?)?
                    } else {
                        r.data_b64()?
                    });
                }
                _ => return Err(Unsure),
            }
            Ok(())
        })?;
        let (Some(dtype), Some(shape), Some(bytes)) = (dtype, shape, bytes) else {
            return Err(Unsure);
        };
        Tensor::from_raw(dtype, shape, bytes).map_err(|_| Unsure)
    }

    /// The dimensions, each a non-negative integer.
    /// Past [`MAX_RANK`] dimensions it stops reading and leaves the refusal to serde, which
    /// stops there too.
    fn shape(&mut self) -> Read<Vec<u64>> {
        self.array_of(|r, read| {
            if read == MAX_RANK {
                return Err(Unsure);
            }
            // i64 first: serde reads the shape as `Vec<i64>`, and a negative one is refused.
            let d: i64 = r.integer()?;
            u64::try_from(d).map_err(|_| Unsure)
        })
    }

    fn data_b64(&mut self) -> Read<Vec<u8>> {
        use base64::Engine as _;
        let text = self.string()?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|_| Unsure)
    }

    /// `count` values of `dtype`: a number, or arrays (nested to any shape, as the serde path
    /// reads them) of numbers and booleans.
    fn data(&mut self, dtype: DType, count: u64) -> Read<Vec<u8>> {
        // The rest of the body bounds what the array can hold, as the serde path's text does.
        let mut encoder = Encoder::new(dtype, count, self.body.len() - self.at);
        self.skip_whitespace();
        if self.peek() == Some(b'[') {
            self.array(&mut encoder)?;
        } else {
            self.scalar(&mut encoder)?;
        }
        if encoder.count != count {
            return Err(Unsure);
        }
        Ok(encoder.out)
    }

    /// A (possibly nested) array of scalars, pushed to `encoder` in order.
    fn array(&mut self, encoder: &mut Encoder) -> Read<()> {
        let mut depth = 0usize;
        loop {
            // At the start of a value.
            self.skip_whitespace();
            if self.peek() == Some(b'[') {
                self.at += 1;
                depth += 1;
                if depth > MAX_DATA_NESTING {
                    return Err(Unsure);
                }
                if !self.empty(b']') {
                    continue;
                }
                depth -= 1;
            } else {
                self.scalar(encoder)?;
            }
            // After a value: a comma leads to the next, closing brackets end arrays.
            loop {
                if depth == 0 {
                    return Ok(());
                }
                if !self.comma_or(b']')? {
                    break;
                }
                depth -= 1;
            }
        }
    }

    /// One number or boolean, pushed to `encoder`.
    fn scalar(&mut self, encoder: &mut Encoder) -> Read<()> {
        self.skip_whitespace();
        let scalar = match self.peek() {
            Some(b't') => self.word(b"true", Scalar::Bool(true))?,
            Some(b'f') => self.word(b"false", Scalar::Bool(false))?,
            _ => {
                let (text, decimal) = self.number()?;
                if encoder.dtype == DType::Float32 {
                    // The value is already taken apart: no second walk over its digits.
                    let value = decimal.to_f32().or_else(|| text.parse().ok());
                    return encoder.push_float32(value.ok_or(Unsure)?).ok_or(Unsure);
                }
                Scalar::Number(text)
            }
        };
        encoder.push(scalar).map_err(|_| Unsure)
    }

    fn word(&mut self, word: &[u8], scalar: Scalar<'b>) -> Read<Scalar<'b>> {
        if self.body[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(scalar)
        } else {
            Err(Unsure)
        }
    }
}

/// Where the run of ASCII digits from `at` ends, with each digit added to `value` (wrapping
/// past 19 digits: the caller counts them).
#[inline]
fn digits(body: &[u8], mut at: usize, value: &mut u64) -> usize {
    let mut v = *value;
    while let Some(&b) = body.get(at) {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(digit));
        at += 1;
    }
    *value = v;
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass must answer exactly as serde does, or be unsure; whether it answered.
    fn same_or_unsure(body: &str) -> bool {
        assert!(
            super::super::one_pass_agrees_with_serde(body.as_bytes()),
            "one pass and serde disagree on {body}"
        );
        decode(body.as_bytes()).is_ok()
    }

    #[test]
    fn reads_the_requests_clients_send() {
        for body in [
            r#"{"args":[{"dtype":"int32","shape":[2],"data":[1,2]}],"timeout_ms":5}"#,
            r#" { "timeout_ms" : 0 , "args" : [ { "name" : "x" , "dtype" : "float32" , "shape" : [ 2 , 2 ] , "data" : [ [ 1.5 , -2e3 ] , [ 0 , -0.0 ] ] } ] } "#,
            r#"{"args":[{"dtype":"float32","shape":[],"data":3.25}]}"#,
            r#"{"args":[{"dtype":"bool","shape":[3],"data":[true,false,true]}]}"#,
            r#"{"args":[{"dtype":"uint8","shape":[2],"data_b64":"AQI="}]}"#,
            r#"{"args":[{"dtype":"float64","shape":[3],"data":[[1],[],[2,[3]]]}]}"#,
            r#"{"args":[{"dtype":"int64","shape":[0],"data":[]},{"dtype":"float16","shape":[1],"data":[1.5]}]}"#,
            r#"{"args":[]}"#,
            "{\"args\":[{\"dtype\":\"float32\",\"shape\":[1],\"data\":[1e-3]}]}\n",
        ] {
            assert!(same_or_unsure(body), "one pass should read {body}");
        }
    }

    #[test]
    fn leaves_everything_else_to_serde() {
        for body in [
            // Not JSON, or not quite.
            "",
            "{",
            r#"{"args":[{"dtype":"int32","shape":[2],"data":[1,2]}]} x"#,
            r#"{"args":[{"dtype":"int32","shape":[2],"data":[1,,2]}]}"#,
            r#"{"args":[{"dtype":"int32","shape":[2],"data":[1,2,]}]}"#,
            r#"{"args":[{"dtype":"int32","shape":[2],"data":[01,2]}]}"#,
            r#"{"args":[{"dtype":"float32","shape":[1],"data":[1.]}]}"#,
            r#"{"args":[{"dtype":"float32","shape":[1],"data":[.5]}]}"#,
            r#"{"args":[{"dtype":"float32","shape":[1],"data":[1e]}]}"#,
            r#"{"args":[{"dtype":"int32","shape":[2],"data":[1 2]}]}"#,
            r#"{"args":[{"dtype":"int32","shape":[2],"data":[[1,2]}]}"#,
            r#"{"args":[{"dtype":"bool","shape":[1],"data":[tru]}]}"#,
            // JSON, but wrong.
            r#"{"args":[{"dtype":"int8","shape":[1],"data":[300]}]}"#,
            r#"{"args":[{"dtype":"int32","shape":[3],"data":[1,2]}]}"#,
            r#"{"args":[{"dtype":"int32","shape":[-1],"data":[]}]}"#,
            r#"{"args":[{"dtype":"int32","shape":[2],"data":[1,2]}],"extra":1}"#,
            r#"{"args":[],"args":[]}"#,
            r#"{"timeout_ms":1}"#,
            r#"{"args":[],"timeout_ms":-1}"#,
            r#"{"args":[],"timeout_ms":1.0}"#,
            r#"{"args":[{"dtype":"float32","shape":[1],"data":[1e39]}]}"#,
            // Valid, but for serde to read.
            r#"{"args":[{"dtype":"float32","shape":[1],"data":["NaN"]}]}"#,
            r#"{"args":[{"data":[1],"dtype":"int32","shape":[1]}]}"#,
            r#"{"\u0061rgs":[]}"#,
            r#"{"args":[{"name":{"a":1},"dtype":"int32","shape":[1],"data":[1]}]}"#,
            r#"{"args":[{"dtype":"string","shape":[1],"data":["a"]}]}"#,
        ] {
            assert!(
                !same_or_unsure(body),
                "one pass should leave {body} to serde"
            );
        }
    }

    #[test]
    fn nesting_past_the_limit_is_left_to_serde() {
        let deep = format!(
            r#"{{"args":[{{"dtype":"int8","shape":[1],"data":{}1{}}}]}}"#,
            "[".repeat(MAX_DATA_NESTING + 1),
            "]".repeat(MAX_DATA_NESTING + 1)
        );
        assert_eq!(decode(deep.as_bytes()).err(), Some(Unsure));
        let at_limit = format!(
            r#"{{"args":[{{"dtype":"int8","shape":[1],"data":{}1{}}}]}}"#,
            "[".repeat(MAX_DATA_NESTING),
            "]".repeat(MAX_DATA_NESTING)
        );
        assert!(same_or_unsure(&at_limit));
    }

    #[test]
    fn floats_come_out_as_the_serde_path_reads_them() {
        let values: Vec<f32> = (0..20_000)
            .map(|i| (i as f32 * 0.37).sin() * 10f32.powi(i % 60 - 30))
            .collect();
        let data = serde_json::to_string(&values).unwrap();
        let body = format!(
            r#"{{"args":[{{"dtype":"float32","shape":[{}],"data":{data}}}]}}"#,
            values.len()
        );
        assert!(same_or_unsure(&body));
        let request = decode(body.as_bytes()).unwrap();
        assert_eq!(request.args[0].to_vec::<f32>().unwrap(), values);
    }
}
