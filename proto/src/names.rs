//! The one rule for method names, shared by the server, the clients and the guest SDK's macro.
//!
//! A name appears in URL paths, metrics labels and logs, so it is short and path-safe.

/// The longest a name may be, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// The rule, for error messages.
pub const NAME_RULE: &str =
    "1 to 128 characters from A-Z, a-z, 0-9, `_`, `-` and `.`, starting with a letter or digit";

/// Whether `name` follows [`NAME_RULE`].
///
/// ```
/// use wasmrpc_proto::names::is_valid_name;
/// assert!(is_valid_name("add_f32.v2-beta"));
/// assert!(!is_valid_name("_hidden"));
/// assert!(!is_valid_name("a/b"));
/// ```
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= MAX_NAME_LEN
        && first.is_ascii_alphanumeric()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `Ok` for a valid name, else a message naming it and stating the rule.
///
/// # Errors
/// The message, when `name` breaks [`NAME_RULE`].
///
/// ```
/// use wasmrpc_proto::names::check_name;
/// assert!(check_name("add").is_ok());
/// assert_eq!(
///     check_name("../etc").unwrap_err(),
///     "`../etc` is not a valid method name: 1 to 128 characters from A-Z, a-z, 0-9, `_`, `-` \
///      and `.`, starting with a letter or digit"
/// );
/// ```
pub fn check_name(name: &str) -> Result<(), String> {
    if is_valid_name(name) {
        Ok(())
    } else {
        Err(format!("`{name}` is not a valid method name: {NAME_RULE}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_path_safe() {
        assert!(is_valid_name("add"));
        assert!(is_valid_name("add_f32.v2-beta"));
        assert!(is_valid_name("9lives"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("../etc"));
        assert!(!is_valid_name("a/b"));
        assert!(!is_valid_name("_hidden"));
        assert!(!is_valid_name("-flag"));
        assert!(!is_valid_name("héllo"));
        assert!(!is_valid_name("a b"));
        assert!(is_valid_name(&"a".repeat(128)));
        assert!(!is_valid_name(&"a".repeat(129)));
    }
}
