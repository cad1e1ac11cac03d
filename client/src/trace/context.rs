//! [`TraceContext`]: one W3C Trace Context (level 1), the `traceparent` a request carries and the
//! `tracestate` beside it, parsed and written strictly to the specification.
//!
//! Strict because a server drops a malformed `traceparent` silently and starts a new trace: a
//! mistake caught here, with what is wrong, is one a caller can fix.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use crate::code::Code;
use crate::error::Error;

/// The header that carries a request's parent span (W3C Trace Context).
///
/// ```
/// assert_eq!(wasmrpc_client::trace::TRACEPARENT, "traceparent");
/// ```
pub const TRACEPARENT: &str = "traceparent";

/// The header that carries vendors' trace state beside [`TRACEPARENT`].
///
/// ```
/// assert_eq!(wasmrpc_client::trace::TRACESTATE, "tracestate");
/// ```
pub const TRACESTATE: &str = "tracestate";

/// The longest `tracestate` accepted: the specification's 512 characters, the length every
/// vendor must propagate (a longer one could be cut anywhere on the way).
pub const MAX_TRACESTATE_LEN: usize = 512;

/// The most list members a `tracestate` may have (the specification's 32).
pub const MAX_TRACESTATE_MEMBERS: usize = 32;

/// `00-` + 32 + `-` + 16 + `-` + 2.
const TRACEPARENT_LEN: usize = 55;

/// A W3C trace context: the trace id, the id of the caller's span (the parent of the server's),
/// the trace flags, and the vendors' `tracestate`, if any.
///
/// Made by parsing headers ([`TraceContext::parse`], or [`str::parse`] for a `traceparent`
/// alone) or from its parts ([`TraceContext::new`]); written as headers by
/// [`TraceContext::traceparent`] and [`TraceContext::tracestate`]. Every value of this type is
/// valid: all-zero ids, other versions and malformed `tracestate` lists are refused on the way
/// in.
///
/// ```
/// use wasmrpc_client::trace::TraceContext;
/// # fn main() -> Result<(), wasmrpc_client::Error> {
/// let ctx = TraceContext::parse(
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
///     Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
/// )?;
/// assert!(ctx.is_sampled());
/// assert_eq!(ctx.traceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
/// assert_eq!(ctx.tracestate(), Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
/// assert!(TraceContext::parse("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None)
///     .unwrap_err()
///     .is_invalid_argument());
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TraceContext {
    trace_id: [u8; 16],
    parent_id: [u8; 8],
    flags: u8,
    tracestate: Option<String>,
}

impl TraceContext {
    /// The flag bit saying the caller records this trace (`sampled`).
    pub const SAMPLED: u8 = 0x01;

    /// A context from its parts, with no `tracestate`.
    ///
    /// # Errors
    /// INVALID_ARGUMENT when either id is all zeros (the specification's invalid value).
    ///
    /// ```
    /// use wasmrpc_client::trace::TraceContext;
    /// let ctx = TraceContext::new([0xab; 16], [0xcd; 8], TraceContext::SAMPLED).unwrap();
    /// assert_eq!(ctx.to_string(), format!("00-{}-{}-01", "ab".repeat(16), "cd".repeat(8)));
    /// assert!(TraceContext::new([0; 16], [1; 8], 0).is_err());
    /// ```
    pub fn new(trace_id: [u8; 16], parent_id: [u8; 8], flags: u8) -> Result<TraceContext, Error> {
        if trace_id == [0; 16] {
            return Err(invalid(
                "the trace id is all zeros, which W3C Trace Context forbids",
            ));
        }
        if parent_id == [0; 8] {
            return Err(invalid(
                "the parent id is all zeros, which W3C Trace Context forbids",
            ));
        }
        Ok(TraceContext {
            trace_id,
            parent_id,
            flags,
            tracestate: None,
        })
    }

    /// Parse a `traceparent` header and, when there is one, the `tracestate` beside it.
    ///
    /// The `traceparent` must be version `00` exactly as level 1 writes it:
    /// `00-{32 hex}-{16 hex}-{2 hex}`, lowercase, neither id all zeros. An empty `tracestate`
    /// is the same as none.
    ///
    /// # Errors
    /// INVALID_ARGUMENT naming what is wrong with either header.
    ///
    /// ```
    /// use wasmrpc_client::trace::TraceContext;
    /// let err = TraceContext::parse("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", None)
    ///     .unwrap_err();
    /// assert!(err.message().contains("lowercase"), "{err}");
    /// ```
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Result<TraceContext, Error> {
        let ctx = parse_traceparent(traceparent).map_err(|why| {
            invalid(format!(
                "`{}` is not a W3C traceparent (00-<32 hex trace id>-<16 hex parent id>-<2 hex \
                 flags>, lowercase): {why}",
                shorten(traceparent)
            ))
        })?;
        match tracestate {
            Some(state) => ctx.with_tracestate(state),
            None => Ok(ctx),
        }
    }

    /// This context with `tracestate` (replacing any it had; an empty one removes it).
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a list the specification does not allow: longer than
    /// [`MAX_TRACESTATE_LEN`], more than [`MAX_TRACESTATE_MEMBERS`] members, a member that is
    /// not `key=value` with a valid key and value, or a key given twice.
    ///
    /// ```
    /// use wasmrpc_client::trace::TraceContext;
    /// let ctx = TraceContext::new([1; 16], [2; 8], 1).unwrap();
    /// assert_eq!(ctx.clone().with_tracestate("vendor=opaque").unwrap().tracestate(), Some("vendor=opaque"));
    /// assert!(ctx.with_tracestate("Vendor=opaque").is_err());
    /// ```
    pub fn with_tracestate(mut self, tracestate: &str) -> Result<TraceContext, Error> {
        let state = tracestate.trim_matches(OWS);
        if state.len() > MAX_TRACESTATE_LEN {
            return Err(invalid(format!(
                "the tracestate is {} characters long; W3C Trace Context allows at most \
                 {MAX_TRACESTATE_LEN}",
                state.len()
            )));
        }
        let members = check_tracestate(state).map_err(|why| {
            invalid(format!(
                "`{}` is not a W3C tracestate (key=value,...): {why}",
                shorten(state)
            ))
        })?;
        self.tracestate = (members > 0).then(|| state.to_owned());
        Ok(self)
    }

    /// The trace id's 16 bytes.
    pub fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The caller's span id, the parent of the server's spans: 8 bytes.
    pub fn parent_id(&self) -> [u8; 8] {
        self.parent_id
    }

    /// The trace flags (bit 0: [`TraceContext::SAMPLED`]).
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// Whether the caller records this trace.
    pub fn is_sampled(&self) -> bool {
        self.flags & Self::SAMPLED != 0
    }

    /// The `traceparent` header's value: `00-{trace id}-{parent id}-{flags}`.
    pub fn traceparent(&self) -> String {
        self.to_string()
    }

    /// The `tracestate` header's value, when there is one to send.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The headers a request carries for this context: `traceparent`, and `tracestate` when
    /// there is one.
    pub(crate) fn insert_into(&self, headers: &mut http::HeaderMap) {
        // Both are visible ASCII by construction, so neither conversion can fail.
        if let Ok(value) = http::HeaderValue::try_from(self.traceparent()) {
            headers.insert(TRACEPARENT, value);
        }
        if let Some(value) = self
            .tracestate()
            .and_then(|s| http::HeaderValue::from_str(s).ok())
        {
            headers.insert(TRACESTATE, value);
        } else {
            headers.remove(TRACESTATE);
        }
    }
}

impl fmt::Display for TraceContext {
    /// The `traceparent` header's value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        f.write_char('-')?;
        for b in self.parent_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceContext")
            .field("traceparent", &format_args!("{self}"))
            .field("tracestate", &self.tracestate)
            .finish()
    }
}

impl FromStr for TraceContext {
    type Err = Error;

    /// A `traceparent` alone ([`TraceContext::parse`] with no `tracestate`).
    fn from_str(traceparent: &str) -> Result<TraceContext, Error> {
        TraceContext::parse(traceparent, None)
    }
}

/// Optional whitespace around list members, as HTTP lists allow: spaces and tabs.
const OWS: [char; 2] = [' ', '\t'];

fn invalid(message: impl Into<String>) -> Error {
    Error::new(Code::InvalidArgument, message)
}

/// A header value as an error message shows it: not a page of it.
fn shorten(value: &str) -> String {
    const SHOWN: usize = 80;
    match value.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_owned(),
    }
}

fn parse_traceparent(value: &str) -> Result<TraceContext, String> {
    let parts: Vec<&str> = value.split('-').collect();
    let [version, trace_id, parent_id, flags] = parts[..] else {
        return Err(format!(
            "it has {} dash-separated fields, not 4",
            parts.len()
        ));
    };
    match version {
        "00" => {}
        "ff" => return Err("version ff is invalid".into()),
        v if v.len() == 2 && is_lower_hex(v) => {
            return Err(format!("version {v} is not 00, the one this client writes"));
        }
        v => return Err(format!("the version `{v}` is not 2 lowercase hex digits")),
    }
    if value.len() != TRACEPARENT_LEN {
        return Err(format!(
            "it is {} characters long, not {TRACEPARENT_LEN}",
            value.len()
        ));
    }
    let trace_id: [u8; 16] = hex_field("trace id", trace_id)?;
    let parent_id: [u8; 8] = hex_field("parent id", parent_id)?;
    let [flags] = hex_field("flags", flags)?;
    TraceContext::new(trace_id, parent_id, flags).map_err(|e| e.message().to_owned())
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `N` bytes from exactly `2 * N` lowercase hex digits.
fn hex_field<const N: usize>(what: &str, text: &str) -> Result<[u8; N], String> {
    if text.len() != 2 * N {
        return Err(format!(
            "the {what} is {} characters, not {}",
            text.len(),
            2 * N
        ));
    }
    if !is_lower_hex(text) {
        // Upper-case hex is the likeliest slip (some tools print ids that way): say so.
        let hint = if text.bytes().all(|b| b.is_ascii_hexdigit()) {
            " (hex digits must be lowercase)"
        } else {
            ""
        };
        return Err(format!("the {what} `{text}` is not lowercase hex{hint}"));
    }
    let mut bytes = [0; N];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(bytes)
}

/// Check a `tracestate` list (already trimmed and within the length limit); the number of
/// members it holds (empty members, which the specification allows, not counted).
fn check_tracestate(state: &str) -> Result<usize, String> {
    let mut keys: Vec<&str> = Vec::new();
    for member in state.split(',').map(|m| m.trim_matches(OWS)) {
        if member.is_empty() {
            continue;
        }
        let Some((key, value)) = member.split_once('=') else {
            return Err(format!("the member `{member}` is not key=value"));
        };
        check_key(key).map_err(|why| format!("the key `{key}` {why}"))?;
        check_value(value).map_err(|why| format!("the value of `{key}` {why}"))?;
        if keys.contains(&key) {
            return Err(format!("the key `{key}` appears twice"));
        }
        keys.push(key);
        if keys.len() > MAX_TRACESTATE_MEMBERS {
            return Err(format!("it has more than {MAX_TRACESTATE_MEMBERS} members"));
        }
    }
    Ok(keys.len())
}

/// The characters a key may have after its first: `a-z 0-9 _ - * /`.
fn key_char(c: u8) -> bool {
    matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'*' | b'/')
}

/// A simple key (`a-z` then up to 255 key characters) or a multi-tenant one
/// (`tenant@system`: a tenant of 1 to 241 characters starting with `a-z` or `0-9`, a system of
/// 1 to 14 starting with `a-z`).
fn check_key(key: &str) -> Result<(), &'static str> {
    let ok = |part: &str, max: usize, first_digit: bool| {
        let bytes = part.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= max
            && (bytes[0].is_ascii_lowercase() || (first_digit && bytes[0].is_ascii_digit()))
            && bytes[1..].iter().all(|&c| key_char(c))
    };
    let valid = match key.split_once('@') {
        None => ok(key, 256, false),
        Some((tenant, system)) => ok(tenant, 241, true) && ok(system, 14, false),
    };
    if valid {
        Ok(())
    } else {
        Err(
            "is not a tracestate key (lowercase letters, digits and _-*/, starting with a letter; \
             or tenant@system)",
        )
    }
}

/// 1 to 256 printable ASCII characters other than `,` and `=`, not ending in a space.
fn check_value(value: &str) -> Result<(), &'static str> {
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > 256 {
        return Err("must be 1 to 256 characters");
    }
    if !bytes
        .iter()
        .all(|&c| (0x20..=0x7e).contains(&c) && c != b',' && c != b'=')
    {
        return Err("may only hold printable ASCII other than `,` and `=`");
    }
    if bytes.last() == Some(&b' ') {
        return Err("may not end with a space");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specifications_example_parses_and_writes_back_unchanged() {
        let ctx: TraceContext = EXAMPLE.parse().unwrap();
        assert_eq!(ctx.trace_id()[0], 0x4b);
        assert_eq!(ctx.parent_id()[7], 0xb7);
        assert_eq!(ctx.flags(), 1);
        assert!(ctx.is_sampled());
        assert_eq!(ctx.traceparent(), EXAMPLE);
        assert_eq!(ctx.tracestate(), None);
        let unsampled: TraceContext = EXAMPLE.replace("-01", "-00").parse().unwrap();
        assert!(!unsampled.is_sampled());
        // Flags this level does not define are carried as they are.
        let other: TraceContext = EXAMPLE.replace("-01", "-ff").parse().unwrap();
        assert_eq!(other.flags(), 0xff);
    }

    #[test]
    fn a_malformed_traceparent_is_invalid_argument_saying_what_is_wrong() {
        let zeros32 = "0".repeat(32);
        let cases: [(String, String); 13] = [
            (String::new(), "1 dash-separated fields".into()),
            (
                EXAMPLE.replacen("00-", "01-", 1),
                "version 01 is not 00".into(),
            ),
            (
                EXAMPLE.replacen("00-", "ff-", 1),
                "version ff is invalid".into(),
            ),
            (EXAMPLE.replacen("00-", "0x-", 1), "version `0x`".into()),
            (format!("{EXAMPLE}-00"), "5 dash-separated fields".into()),
            (EXAMPLE.to_uppercase(), "must be lowercase".into()),
            (
                EXAMPLE.replace("4bf92f", "4BF92F"),
                "must be lowercase".into(),
            ),
            (EXAMPLE.replace("4bf92f", "4bf92"), "characters long".into()),
            (
                EXAMPLE.replace("4bf92f", "4bf92g"),
                "not lowercase hex".into(),
            ),
            (
                format!("00-{zeros32}-00f067aa0ba902b7-01"),
                "trace id is all zeros".into(),
            ),
            (
                EXAMPLE.replace("00f067aa0ba902b7", "0000000000000000"),
                "parent id is all zeros".into(),
            ),
            (EXAMPLE.replace("-01", "-1 "), "flags".into()),
            (format!(" {}", &EXAMPLE[1..]), "version".into()),
        ];
        for (text, why) in cases {
            let Err(err) = TraceContext::parse(&text, None) else {
                panic!("`{text}` was accepted");
            };
            assert!(err.is_invalid_argument(), "{err}");
            assert!(err.message().contains("not a W3C traceparent"), "{err}");
            assert!(
                err.message().contains(&why),
                "`{text}`: {err} (wanted {why})"
            );
        }
    }

    #[test]
    fn a_valid_tracestate_is_passed_through_and_an_empty_one_is_none() {
        let state = "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE,,fw529a3039@dt=W3C TraceContext";
        let ctx = TraceContext::parse(EXAMPLE, Some(state)).unwrap();
        assert_eq!(ctx.tracestate(), Some(state));
        let padded = TraceContext::parse(EXAMPLE, Some("  a=1\t")).unwrap();
        assert_eq!(padded.tracestate(), Some("a=1"));
        for empty in ["", " ", ",", " , ,"] {
            let ctx = TraceContext::parse(EXAMPLE, Some(empty)).unwrap();
            assert_eq!(ctx.tracestate(), None, "`{empty}`");
        }
    }

    #[test]
    fn a_malformed_tracestate_is_invalid_argument_saying_what_is_wrong() {
        let members = |n: usize| {
            (0..n)
                .map(|i| format!("k{i}=v"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let long = format!("a={}", "x".repeat(MAX_TRACESTATE_LEN));
        let crowded = members(MAX_TRACESTATE_MEMBERS + 1);
        let cases = [
            ("novalue", "is not key=value"),
            ("Upper=1", "is not a tracestate key"),
            ("1abc=1", "is not a tracestate key"),
            ("a@=1", "is not a tracestate key"),
            ("tenant@Sys=1", "is not a tracestate key"),
            ("a=", "1 to 256 characters"),
            ("a=b=c", "other than `,` and `=`"),
            ("a=b\u{7f}", "printable ASCII"),
            ("a=1,a=2", "appears twice"),
            (crowded.as_str(), "more than 32 members"),
            (long.as_str(), "at most 512"),
        ];
        for (state, why) in cases {
            let err = TraceContext::parse(EXAMPLE, Some(state)).unwrap_err();
            assert!(err.is_invalid_argument(), "{err}");
            assert!(
                err.message().contains(why),
                "`{state}`: {err} (wanted {why})"
            );
        }
        let most = members(MAX_TRACESTATE_MEMBERS);
        assert!(TraceContext::parse(EXAMPLE, Some(&most)).is_ok());
        // Values are at most 256 characters: two members make the longest list.
        let longest = format!("a={},b={}", "x".repeat(255), "y".repeat(252));
        assert_eq!(longest.len(), MAX_TRACESTATE_LEN);
        assert!(TraceContext::parse(EXAMPLE, Some(&longest)).is_ok());
    }

    #[test]
    fn headers_carry_both_values_and_drop_a_stale_tracestate() {
        let mut headers = http::HeaderMap::new();
        headers.insert(TRACESTATE, http::HeaderValue::from_static("old=1"));
        let plain: TraceContext = EXAMPLE.parse().unwrap();
        plain.insert_into(&mut headers);
        assert_eq!(headers[TRACEPARENT], EXAMPLE);
        assert!(!headers.contains_key(TRACESTATE));
        plain
            .with_tracestate("new=2")
            .unwrap()
            .insert_into(&mut headers);
        assert_eq!(headers[TRACESTATE], "new=2");
    }

    #[test]
    fn debug_shows_the_header_form() {
        let ctx: TraceContext = EXAMPLE.parse().unwrap();
        assert!(format!("{ctx:?}").contains(EXAMPLE));
    }
}
