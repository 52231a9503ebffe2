//! CRC-32C carried over zero bytes in logarithmic time: what the forwarding rewrite needs to
//! derive a batch's new CRC from its old one without reading its records
//! (`rewrite::crc_after_patch`).
//!
//! The `crc32c` crate's `crc32c_combine` does the same by squaring 32x32 bit matrices for every
//! bit of the length, some ten microseconds per call: more than reading a 16 KiB batch. Here a
//! CRC register is a polynomial over GF(2) in the reflected order CRC-32C uses (bit 31 is x^0),
//! appending `n` zero bytes multiplies it by x^(8n) modulo the CRC-32C polynomial, and x^(8n) is
//! a product of the precomputed powers x^(2^k): a few dozen shifts and xors per set bit of `n`.

/// The CRC-32C (Castagnoli) polynomial, reflected.
const POLY: u32 = 0x82F6_3B78;

/// x^0 in the reflected order.
const ONE: u32 = 1 << 31;

/// `a * b` modulo [`POLY`], both reflected.
const fn mul(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = ONE;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        bit >>= 1;
        // b := b * x
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    product
}

/// `POWERS[k]` = x^(2^k) modulo [`POLY`], for every bit of a length in bits (a `usize` of bytes
/// times 8 has at most 67).
const POWERS: [u32; 67] = {
    let mut powers = [0u32; 67];
    let mut p = ONE >> 1; // x^1
    let mut k = 0;
    while k < 67 {
        powers[k] = p;
        p = mul(p, p);
        k += 1;
    }
    powers
};

/// x^(8 * `bytes`) modulo [`POLY`]: the operator that carries a CRC over `bytes` zero bytes.
fn zeros(bytes: usize) -> u32 {
    let mut bits = (bytes as u128) * 8;
    let mut op = ONE;
    for power in POWERS {
        if bits == 0 {
            break;
        }
        if bits & 1 != 0 {
            op = mul(power, op);
        }
        bits >>= 1;
    }
    op
}

/// The CRC-32C of `a` followed by `b`, from `crc32c(a)`, `crc32c(b)` and the length of `b`
/// (what `crc32c::crc32c_combine` returns, faster).
pub(crate) fn combine(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    mul(zeros(len_b), crc_a) ^ crc_b
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn combine_is_the_crc_of_the_concatenation(
            a in prop::collection::vec(any::<u8>(), 0..300),
            b in prop::collection::vec(any::<u8>(), 0..3000),
        ) {
            let whole = [a.as_slice(), b.as_slice()].concat();
            let got = combine(crc32c::crc32c(&a), crc32c::crc32c(&b), b.len());
            prop_assert_eq!(got, crc32c::crc32c(&whole));
        }

        #[test]
        fn combine_agrees_with_the_crate_at_any_length(crc_a in any::<u32>(), crc_b in any::<u32>(), len in any::<u32>()) {
            let len = len as usize;
            prop_assert_eq!(combine(crc_a, crc_b, len), crc32c::crc32c_combine(crc_a, crc_b, len));
        }
    }
}
