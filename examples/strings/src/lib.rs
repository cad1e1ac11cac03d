//! String tensors: the `bytes` dtype seen as UTF-8 `String`s.
//!
//! Exports `upper(s: string) -> output: string`, the Unicode upper case of every element, shape
//! preserved, and `length(s: string) -> output: int64`, the number of Unicode scalar values of every
//! element. An argument element that is not valid UTF-8 is refused by the SDK with
//! `invalid-argument` naming the argument.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p example-strings`.

use wasmrpc_guest::Tensor;

/// Upper-cases every string of a string tensor (full Unicode case mapping); the shape is kept.
#[wasmrpc_guest::method]
pub fn upper(s: Tensor<String>) -> Tensor<String> {
    s.map(|x| x.to_uppercase())
}

/// The length of every string of a string tensor, in Unicode scalar values (not bytes).
#[wasmrpc_guest::method]
pub fn length(s: Tensor<String>) -> Tensor<i64> {
    s.map(|x| i64::try_from(x.chars().count()).unwrap_or(i64::MAX))
}

wasmrpc_guest::export!(upper, length);

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(shape: &[usize], data: &[&str]) -> Tensor<String> {
        Tensor::new(shape, data.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    #[test]
    fn upper_cases_every_element_and_keeps_the_shape() {
        let s = strings(&[2, 2], &["hello", "Wörld", "", "straße"]);
        assert_eq!(
            upper(s),
            strings(&[2, 2], &["HELLO", "WÖRLD", "", "STRASSE"])
        );
        assert_eq!(upper(strings(&[], &["a"])), strings(&[], &["A"]));
    }

    #[test]
    fn length_counts_characters_not_bytes() {
        let n = length(strings(&[3], &["abc", "日本語", ""]));
        assert_eq!(n.as_slice(), &[3, 3, 0]);
    }

    #[test]
    fn mismatched_element_count_is_refused() {
        assert!(Tensor::new([2], vec!["one".to_string()]).is_err());
    }
}
