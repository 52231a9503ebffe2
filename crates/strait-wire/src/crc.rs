//! CRC-32C carried over zero bytes in logarithmic time: what the forwarding rewrite needs to
//! derive a batch's new CRC from its old one without reading its records
//! (`rewrite::crc_after_patch`).
//!
//! The `crc32c` crate's `crc32c_combine` does the same by squaring 32x32 bit matrices for every
//! bit of the length, some ten microseconds per call: more than reading a 16 KiB batch. Here a
//! CRC register is a polynomial over GF(2) in the reflected order CRC-32C uses (bit 31 is x^0),
//! appending `n` zero bytes multiplies it by x^(8n) modulo the CRC-32C polynomial, and x^(8n) is
//! a product of precomputed powers, one per hexadecimal digit of `n` ([`ZEROS`]); each product
//! takes a nibble of one factor at a time ([`times`]). For a batch of 16 KiB that is five
//! products of some sixty operations each, once per forwarded batch.

/// The CRC-32C (Castagnoli) polynomial, reflected.
const POLY: u32 = 0x82F6_3B78;

/// x^0 in the reflected order.
const ONE: u32 = 1 << 31;

/// `b * x` modulo [`POLY`], reflected.
const fn times_x(b: u32) -> u32 {
    if b & 1 != 0 {
        (b >> 1) ^ POLY
    } else {
        b >> 1
    }
}

/// `a * b` modulo [`POLY`], both reflected, a bit at a time: the reference, and what the tables
/// are built with at compile time.
const fn mul(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = ONE;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        bit >>= 1;
        b = times_x(b);
    }
    product
}

/// `REDUCE4[v]`: the four low bits `v` of a register (x^28..x^31) times x^4, reduced; so that
/// `r * x^4` is `(r >> 4) ^ REDUCE4[r & 0xF]`.
const REDUCE4: [u32; 16] = {
    let mut table = [0u32; 16];
    let mut v = 0;
    while v < 16 {
        table[v] = times_x(times_x(times_x(times_x(v as u32))));
        v += 1;
    }
    table
};

/// `a * b` modulo [`POLY`], as [`mul`] but a nibble of `a` at a time (Horner's rule from its
/// highest powers), with the sixteen multiples of `b` made first.
fn times(a: u32, b: u32) -> u32 {
    // multiples[n]: bit 3 of n stands for x^0, bit 0 for x^3 (as a nibble of a reflected `a`).
    let basis = [
        b,
        times_x(b),
        times_x(times_x(b)),
        times_x(times_x(times_x(b))),
    ];
    let mut multiples = [0u32; 16];
    for n in 1..16usize {
        let lowest = n.trailing_zeros() as usize;
        multiples[n] = multiples[n & (n - 1)] ^ basis[3 - lowest];
    }
    let mut product = 0u32;
    for k in (0..8).rev() {
        product = (product >> 4) ^ REDUCE4[(product & 0xF) as usize];
        product ^= multiples[((a >> (28 - 4 * k)) & 0xF) as usize];
    }
    product
}

/// `POWERS[k]` = x^(2^k) modulo [`POLY`], from which [`ZEROS`] is built (a `usize` of bytes
/// times 8 has at most 67 bits).
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

/// `ZEROS[k][v]` = x^(8 * v * 16^k) modulo [`POLY`]: the operator that carries a CRC over
/// `v * 16^k` zero bytes, for every hexadecimal digit `v` of a `usize` length.
const ZEROS: [[u32; 16]; 16] = {
    let mut table = [[ONE; 16]; 16];
    let mut k = 0;
    while k < 16 {
        // x^(8 * 16^k) = x^(2^(3 + 4k)).
        let step = POWERS[3 + 4 * k];
        let mut v = 1;
        while v < 16 {
            table[k][v] = mul(table[k][v - 1], step);
            v += 1;
        }
        k += 1;
    }
    table
};

/// x^(8 * `bytes`) modulo [`POLY`]: the operator that carries a CRC over `bytes` zero bytes.
fn zeros(bytes: usize) -> u32 {
    let mut op = ONE;
    let mut rest = bytes;
    for digits in ZEROS {
        if rest == 0 {
            break;
        }
        let v = rest & 0xF;
        if v != 0 {
            op = times(digits[v], op);
        }
        rest >>= 4;
    }
    op
}

/// The CRC-32C of `a` followed by `b`, from `crc32c(a)`, `crc32c(b)` and the length of `b`
/// (what `crc32c::crc32c_combine` returns, faster).
pub(crate) fn combine(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    times(zeros(len_b), crc_a) ^ crc_b
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
        fn a_product_a_nibble_at_a_time_is_the_product_a_bit_at_a_time(a in any::<u32>(), b in any::<u32>()) {
            prop_assert_eq!(times(a, b), mul(a, b));
        }

        #[test]
        fn combine_agrees_with_the_crate_at_any_length(crc_a in any::<u32>(), crc_b in any::<u32>(), len in any::<u32>()) {
            let len = len as usize;
            prop_assert_eq!(combine(crc_a, crc_b, len), crc32c::crc32c_combine(crc_a, crc_b, len));
        }
    }
}
