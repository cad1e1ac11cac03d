// Conversions between JavaScript numbers and the 16-bit float formats float16 (IEEE 754 binary16)
// and bfloat16 (the upper half of a float32). Neither engine this SDK runs on (StarlingMonkey, node 20)
// has a Float16Array, so 16-bit floats travel as their bit patterns and reach users as Float32Array:
// every float16 and bfloat16 value is exactly representable in a float32, so decoding loses nothing.
// Encoding rounds to nearest, ties to even, as the Rust SDK's `half` crate does.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The float16 bit pattern nearest to `value` (ties to even; overflow to infinity; NaN stays NaN). */
export function f16Bits(value) {
  f32[0] = value; // first round to float32, as `half::f16::from_f32` is given a float32
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // A float16 subnormal (or zero): the value is m * 2^-24 with m = full mantissa >> (14 - e).
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa rolls into the exponent, which is the right answer (up to infinity).
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half++;
  return sign | half;
}

/** The number a float16 bit pattern stands for. */
export function f16Value(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** The bfloat16 bit pattern nearest to `value` (ties to even; NaN stays a quiet NaN). */
export function bf16Bits(value) {
  f32[0] = value;
  const x = u32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** The number a bfloat16 bit pattern stands for. */
export function bf16Value(bits) {
  u32[0] = (bits & 0xffff) << 16;
  return f32[0];
}
