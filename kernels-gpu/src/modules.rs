//! The PTX modules the kernels are split into: one per kernel family (and per architecture),
//! so that a program loads, and the driver JIT-compiles, only the families it uses.
//!
//! A kernel's family is fixed by the prefix of its entry name ([`Family::of_entry`]); the
//! root `build.rs` splits the compiled PTX along it and the host loads a family's module the
//! first time one of its kernels is looked up.

/// A kernel family: one PTX module per architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Correlator,
    Pfb,
    BasebandBeamformer,
    DelayBeamformer,
    FrbBeamformer,
    /// The self-checks of the tensor-core wrappers and intrinsics, and the ceiling kernels.
    Tools,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::Correlator,
        Family::Pfb,
        Family::BasebandBeamformer,
        Family::DelayBeamformer,
        Family::FrbBeamformer,
        Family::Tools,
    ];

    /// The family's name: the module's file stem and the name in load reports.
    pub const fn name(self) -> &'static str {
        match self {
            Family::Correlator => "correlator",
            Family::Pfb => "pfb",
            Family::BasebandBeamformer => "baseband_beamformer",
            Family::DelayBeamformer => "delay_beamformer",
            Family::FrbBeamformer => "frb_beamformer",
            Family::Tools => "tools",
        }
    }

    /// The entry-name prefixes of the family's kernels.
    pub const fn prefixes(self) -> &'static [&'static str] {
        match self {
            Family::Correlator => &["correlate_"],
            Family::Pfb => &["pfb_"],
            Family::BasebandBeamformer => &["baseband_"],
            Family::DelayBeamformer => &["delay_"],
            Family::FrbBeamformer => &["frb_"],
            Family::Tools => &["selftest_", "ceiling_", "bench_"],
        }
    }

    /// The family of the kernel named `entry`, by prefix; `None` for a name no family claims.
    pub fn of_entry(entry: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|family| family.prefixes().iter().any(|p| entry.starts_with(p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_name_one_family_each() {
        for a in Family::ALL {
            for b in Family::ALL {
                for pa in a.prefixes() {
                    for pb in b.prefixes() {
                        assert!(
                            a == b && pa == pb || !(pa.starts_with(pb) || pb.starts_with(pa)),
                            "{pa} {pb}"
                        );
                    }
                }
            }
        }
        assert_eq!(Family::of_entry("correlate_ci8_station_pol"), Some(Family::Correlator));
        assert_eq!(Family::of_entry("frb_resample_gemm"), Some(Family::FrbBeamformer));
        assert_eq!(Family::of_entry("ceiling_copy"), Some(Family::Tools));
        assert_eq!(Family::of_entry("unknown"), None);
    }
}
