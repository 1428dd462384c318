//! [`Shift`]: a right-shift count the kernels apply with rounding, validated to 0..=31.
use crate::error::{Error, Result};
use std::fmt;

/// A rounding right shift `round(x / 2^s)` with `s` in `0..=31` (the range a shift of a 32-bit
/// accumulator has meaning in), e.g. the baseband beamformer's per-beam `s[f][p][beta]`.
///
/// Made only by [`Shift::new`] (or `TryFrom`), which rejects any other value with
/// [`Error::InvalidConfig`], so an array of `Shift`s needs no further range check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shift(u8);

impl Shift {
    /// No shift (`s = 0`).
    pub const ZERO: Shift = Shift(0);
    /// The largest shift, 31.
    pub const MAX: Shift = Shift(31);

    /// The shift `s`; [`Error::InvalidConfig`] unless `s` is in `0..=31`. Takes `i32`, `u32`
    /// and the narrower integer types.
    pub fn new(s: impl Into<i64>) -> Result<Shift> {
        let s = s.into();
        if (0..=31).contains(&s) {
            Ok(Shift(s as u8))
        } else {
            Err(Error::InvalidConfig(format!("a shift must be in 0..=31, got {s}")))
        }
    }

    /// The shift count, in `0..=31`.
    pub const fn get(self) -> u32 {
        self.0 as u32
    }

    /// The count as the `i32` the kernels take.
    pub(crate) const fn as_i32(self) -> i32 {
        self.0 as i32
    }
}

impl TryFrom<i32> for Shift {
    type Error = Error;
    fn try_from(s: i32) -> Result<Shift> {
        Shift::new(s)
    }
}

impl TryFrom<u32> for Shift {
    type Error = Error;
    fn try_from(s: u32) -> Result<Shift> {
        Shift::new(s)
    }
}

impl From<Shift> for u32 {
    fn from(s: Shift) -> u32 {
        s.get()
    }
}

impl fmt::Display for Shift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_are_validated() {
        assert_eq!(Shift::new(0).unwrap(), Shift::ZERO);
        assert_eq!(Shift::new(31u32).unwrap().get(), 31);
        assert_eq!(Shift::try_from(7i32).unwrap().as_i32(), 7);
        for bad in [-1i64, 32, i64::from(i32::MIN), i64::from(u32::MAX)] {
            assert!(matches!(Shift::new(bad), Err(Error::InvalidConfig(_))), "{bad}");
        }
    }
}
