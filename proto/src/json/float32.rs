//! A JSON number, taken apart by the reader (`one_pass.rs`), to the nearest `f32`, quickly for
//! the numbers clients write.
//!
//! The standard library's parse is correct for every input, but general. Most numbers in a
//! tensor have at most 15 or so significant digits and a small exponent; for those, the value
//! `digits × 10^e` is computed in `f64` with one correctly rounded operation (both factors are
//! exact in `f64`: Clinger's fast path), and rounded once more to `f32`. Rounding twice can only
//! go wrong when the `f64` lands exactly halfway between two `f32`s, so that case, and every
//! number outside the fast path, goes to the standard parse. The result is always the nearest
//! `f32`, as `str::parse::<f32>` gives.

/// Powers of ten exactly representable in `f64`.
const POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The largest integer below which every integer is exact in `f64`.
const EXACT_IN_F64: u64 = 1 << 53;

/// Bits of an `f64`'s mantissa below an `f32`'s precision (52 − 23).
const BELOW_F32: u32 = 29;

/// A decimal number taken apart: `digits × 10^exponent`, negated when `negative`. `digits` holds
/// at most 19 significant digits; `exact` is false when more were dropped.
#[derive(Debug, Clone, Copy, Default)]
pub struct Decimal {
    pub negative: bool,
    pub digits: u64,
    pub exponent: i64,
    pub exact: bool,
}

impl Decimal {
    /// The most significant digits `digits` holds without overflowing.
    pub const MOST_DIGITS: usize = 19;

    /// The nearest `f32`, where the fast path is sure of it.
    #[inline]
    pub fn to_f32(self) -> Option<f32> {
        if !self.exact || self.digits >= EXACT_IN_F64 {
            return None;
        }
        let exact = self.digits as f64;
        let power = usize::try_from(self.exponent.unsigned_abs()).ok()?;
        let value = match POWERS_OF_TEN.get(power) {
            Some(&p) if self.exponent >= 0 => exact * p,
            Some(&p) => exact / p,
            None => return None,
        };
        // A value exactly halfway between two f32s (the bits below f32's precision are 1 then
        // all zeros) may have been rounded onto that point from either side.
        let below = value.to_bits() & ((1 << BELOW_F32) - 1);
        if below == 1 << (BELOW_F32 - 1) {
            return None;
        }
        let single = value as f32;
        Some(if self.negative { -single } else { single })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::one_pass::nearest_f32 as parse;

    fn same_as_std(text: &str) {
        let want: f32 = text.parse().unwrap();
        let got = parse(text).unwrap();
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{text}: {got} against {want}"
        );
    }

    #[test]
    fn agrees_with_the_standard_parse() {
        for text in [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "-1",
            "1.5",
            "3.25",
            "0.1",
            "-0.3",
            "1e10",
            "1E-5",
            "2.5e+3",
            "123456789",
            "16777217",
            "3.4028235e38",
            "1e38",
            "1e-38",
            "1e-45",
            "1.17549435e-38",
            "9007199254740993",
            "12345678901234567890",
            "1e400",
            "1e-400",
            "1e0005",
            "2.5E-0003",
            "0.000000000000000000000000000001",
            "841.4709",
            "-756.80255",
            "0.30000001",
            "33554433",
            "1.00000005960464477539062500",
        ] {
            same_as_std(text);
        }
    }

    #[test]
    fn halfway_points_are_rounded_once() {
        // 2^24 + 1 is halfway between two f32s: exact in f64, so the fast path must step aside
        // (the nearest even is 2^24).
        let halfway = Decimal {
            negative: false,
            digits: 16_777_217,
            exponent: 0,
            exact: true,
        };
        assert_eq!(halfway.to_f32(), None);
        same_as_std("16777217");
        // 1 + 2^-24, written out: halfway again.
        same_as_std("1.000000059604644775390625");
    }

    #[test]
    fn agrees_on_many_printed_floats() {
        let mut x: u32 = 0x1234_5678;
        for _ in 0..200_000 {
            // xorshift: spread over every exponent and mantissa.
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let f = f32::from_bits(x);
            if !f.is_finite() {
                continue;
            }
            same_as_std(&f.to_string());
            same_as_std(&format!("{f:e}"));
            same_as_std(&format!("{:.3}", f64::from(f) * 1.000_000_1));
        }
    }

    #[test]
    fn not_a_number_is_none() {
        assert_eq!(parse("abc"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("-"), None);
    }
}
