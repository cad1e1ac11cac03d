//! What a method (and tenant) name may be: it appears in URL paths, metrics labels and logs.

/// The rule, for error messages.
pub const NAME_RULE: &str =
    "1 to 128 characters from A-Z, a-z, 0-9, `_`, `-` and `.`, starting with a letter or digit";

/// Whether `name` follows [`NAME_RULE`].
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= 128
        && first.is_ascii_alphanumeric()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_path_safe() {
        assert!(is_valid_name("add"));
        assert!(is_valid_name("add_f32.v2-beta"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("../etc"));
        assert!(!is_valid_name("a/b"));
        assert!(!is_valid_name("_hidden"));
        assert!(!is_valid_name(&"a".repeat(129)));
    }
}
