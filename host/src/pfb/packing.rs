//! Sample packing: `bits`-bit samples MSB first, as the digitiser sends them, and the
//! output values' decoding.
use super::*;

/// Packs `samples` (each in the signed `bits`-bit range) MSB first, as the digitiser does.
/// Errors on an unsupported width or an out-of-range sample.
pub fn pack_samples(samples: &[i32], bits: u32) -> Result<Vec<u8>> {
    if !BITS.contains(&bits) {
        return Err(Error::InvalidConfig(format!("bits must be one of {BITS:?}, got {bits}")));
    }
    let (lo, hi) = (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1);
    if let Some(bad) = samples.iter().find(|&&s| s < lo || s > hi) {
        return Err(Error::InvalidConfig(format!("sample {bad} does not fit {bits} bits")));
    }
    let total_bits = samples.len().checked_mul(bits as usize).ok_or_else(|| {
        Error::InvalidConfig(format!("{} samples of {bits} bits overflow usize bits", samples.len()))
    })?;
    let mut out = vec![0u8; total_bits.div_ceil(8)];
    let mut bit = 0usize;
    for &s in samples {
        for b in (0..bits).rev() {
            if (s >> b) & 1 == 1 {
                out[bit / 8] |= 0x80 >> (bit % 8);
            }
            bit += 1;
        }
    }
    Ok(out)
}

/// The reference unpacker, one bit at a time: sample `i` of MSB-first packed `bytes`. Errors
/// on an unsupported width or when sample `i` does not lie wholly inside `bytes`.
pub fn unpack_sample(bytes: &[u8], bits: u32, i: usize) -> Result<i32> {
    if !BITS.contains(&bits) {
        return Err(Error::InvalidConfig(format!("bits must be one of {BITS:?}, got {bits}")));
    }
    let end = i.checked_add(1).and_then(|k| k.checked_mul(bits as usize));
    if end.is_none_or(|end| end.div_ceil(8) > bytes.len()) {
        return Err(Error::InvalidConfig(format!(
            "sample {i} of {bits} bits lies past the {} packed bytes",
            bytes.len()
        )));
    }
    let mut v = 0i32;
    for b in 0..bits as usize {
        let bit = i * bits as usize + b;
        v = (v << 1) | ((bytes[bit / 8] >> (7 - bit % 8)) & 1) as i32;
    }
    // Sign-extend from `bits`.
    Ok((v << (32 - bits)) >> (32 - bits))
}
