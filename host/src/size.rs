//! Size arithmetic shared by the config helpers of every family: exact in u128, and as
//! `usize` saturated at `usize::MAX` where the true value does not fit (only for
//! configurations `validate()` rejects), so no helper wraps or panics on any value.

/// `value` as usize, or `usize::MAX` where it does not fit.
pub(crate) fn saturate(value: u128) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

/// The product of `factors` as usize, saturated where it does not fit.
pub(crate) fn product<T: Copy + Into<u128>>(factors: &[T]) -> usize {
    checked_product(factors).unwrap_or(usize::MAX)
}

/// The product of `factors` if it fits in usize.
pub(crate) fn checked_product<T: Copy + Into<u128>>(factors: &[T]) -> Option<usize> {
    let product = factors.iter().try_fold(1u128, |p, &f| p.checked_mul(f.into()))?;
    usize::try_from(product).ok()
}

/// The row-major position `((i0 n1 + i1) n2 + i2) ...` of `terms = [(i0, _), (i1, n1), ...]`
/// (the first extent unused), as usize, saturated where it does not fit.
pub(crate) fn row_major(terms: &[(u32, u32)]) -> usize {
    terms
        .iter()
        .try_fold(0u128, |at, &(i, n)| at.checked_mul(n as u128)?.checked_add(i as u128))
        .map_or(usize::MAX, saturate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_exact_or_saturate() {
        assert_eq!(saturate(5), 5);
        assert_eq!(saturate(u128::MAX), usize::MAX);
        assert_eq!(product(&[3u32, 4, 5]), 60);
        assert_eq!(product::<u32>(&[]), 1);
        assert_eq!(product(&[u32::MAX; 4]), usize::MAX);
        assert_eq!(product(&[u128::MAX, 2]), usize::MAX);
        assert_eq!(checked_product(&[u64::MAX as u128, 2]), None);
        assert_eq!(checked_product(&[1u128 << 20, 1 << 20]), Some(1 << 40));
        assert_eq!(row_major(&[(2, 0), (3, 10), (4, 7)]), (2 * 10 + 3) * 7 + 4);
        assert_eq!(
            row_major(&[(1, 0), (0, u32::MAX), (0, u32::MAX), (0, u32::MAX), (0, u32::MAX)]),
            usize::MAX
        );
    }
}
