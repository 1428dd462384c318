//! The PTX modules the kernels are split into: one per kernel family (and per architecture),
//! so that a program loads, and the driver JIT-compiles, only the families it uses.
//!
//! A kernel's family is fixed by the prefix of its entry name ([`Family::of_entry`]); the
//! root `build.rs` splits the compiled PTX along it and the host loads a family's module the
//! first time one of its kernels is looked up.

/// A kernel family: one PTX module per architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// The X-engine correlators on int8 tensor cores, for complex int8 or int4 input (entry
    /// names `correlate_*`).
    Correlator,
    /// The polyphase filterbank (F-engine) channelizer: FIR, post-processing and fused kernels
    /// (entry names `pfb_*`).
    Pfb,
    /// The CHORD 8-bit baseband beamformer (B-engine) on int8 tensor cores (entry names
    /// `baseband_*`).
    BasebandBeamformer,
    /// The MeerKAT-style delay beamformer: tied-array beams steered by per-antenna delays
    /// (entry names `delay_*`).
    DelayBeamformer,
    /// The CHORD FRB beamformer: gridding FFT beams, resampling and quantisation (entry names
    /// `frb_*`).
    FrbBeamformer,
    /// The self-checks of the tensor-core wrappers and intrinsics, and the ceiling kernels.
    Tools,
}

impl Family {
    /// Every family, one PTX module per architecture each.
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

/// The architecture a PTX module targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// sm_80 PTX: every kernel but Hopper's `wgmma` ones, for every supported GPU (compute
    /// capability 8.0 and newer).
    Sm80,
    /// sm_90a PTX: Hopper's `wgmma` kernels, for compute capability 9.0 only (the "a"
    /// features are not carried forward to later GPUs).
    Sm90a,
}

impl Arch {
    /// Both architectures: sm_80, then sm_90a.
    pub const ALL: [Arch; 2] = [Arch::Sm80, Arch::Sm90a];

    /// The PTX target name (`sm_80`, `sm_90a`).
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm90a => "sm_90a",
        }
    }
}

/// One kernel of a family's registry: its entry point, module, and the launch facts that are
/// fixed at compile time. `build.rs` emits each entry with its register cap (`.maxnreg`, the
/// PTX form of `__launch_bounds__`, which rustc cannot express) and cluster shape
/// (`.reqnctapercluster`), and fails on an entry of the PTX that no registry lists or a
/// registry entry the PTX lacks; the host looks kernels up only through their specs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// The PTX entry point.
    pub name: &'static str,
    /// The module it is in (one per family and architecture).
    pub family: Family,
    /// The architecture of that module: `Sm80` for every kernel but Hopper's `wgmma` ones.
    pub arch: Arch,
    /// Threads per block: the block size the kernel is written for, or the largest block it
    /// takes where a launch may use fewer warps (the baseband beamformer); `None` where the
    /// launcher derives it from the configuration.
    pub threads: Option<u32>,
    /// Dynamic shared memory per block in bytes, where fixed; `None` where the launcher
    /// derives it from the configuration.
    pub shared_bytes: Option<u32>,
    /// Register cap (`.maxnreg`); `None` leaves the choice to ptxas.
    pub max_registers: Option<u32>,
    /// Thread-block cluster shape (`.reqnctapercluster`), for kernels that run in clusters.
    pub cluster: Option<[u32; 3]>,
}

impl KernelSpec {
    /// A spec with no fixed block size, shared memory, register cap or cluster.
    pub const fn new(name: &'static str, family: Family, arch: Arch) -> KernelSpec {
        KernelSpec {
            name,
            family,
            arch,
            threads: None,
            shared_bytes: None,
            max_registers: None,
            cluster: None,
        }
    }
    /// The same spec with a fixed block size of `threads` threads (a multiple of 32).
    pub const fn threads(mut self, threads: u32) -> KernelSpec {
        self.threads = Some(threads);
        self
    }
    /// The same spec with a fixed dynamic shared-memory size of `bytes` bytes per block.
    pub const fn shared_bytes(mut self, bytes: u32) -> KernelSpec {
        self.shared_bytes = Some(bytes);
        self
    }
    /// The same spec with a register cap: `build.rs` emits `.maxnreg registers` on the entry.
    pub const fn max_registers(mut self, registers: u32) -> KernelSpec {
        self.max_registers = Some(registers);
        self
    }
    /// The same spec launched in thread-block clusters of `x * y * z` blocks: `build.rs`
    /// emits `.reqnctapercluster x, y, z` on the entry.
    pub const fn cluster(mut self, x: u32, y: u32, z: u32) -> KernelSpec {
        self.cluster = Some([x, y, z]);
        self
    }
}

/// The registries: the one list of kernels that `build.rs` and the host read (a family may
/// keep its kernels in more than one table).
pub const REGISTRY: &[&[KernelSpec]] = &[
    crate::correlator::KERNELS,
    crate::pfb::KERNELS,
    crate::baseband_beamformer::KERNELS,
    crate::delay_beamformer::KERNELS,
    crate::frb_beamformer::KERNELS,
    crate::frb_beamformer::resample::KERNELS,
    TOOLS,
];

/// Every kernel of every family.
pub fn kernels() -> impl Iterator<Item = &'static KernelSpec> {
    REGISTRY.iter().copied().flatten()
}

/// The name of the kernel a line of PTX opens (`.visible .entry name(` or `.entry name(`),
/// if it opens one: what `build.rs` and the tests that read the PTX modules parse.
pub fn entry_name(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    let rest = trimmed.strip_prefix(".visible .entry ").or_else(|| trimmed.strip_prefix(".entry "))?;
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The spec of the entry point `name` in the `arch` modules, if a registry lists it.
pub fn find(name: &str, arch: Arch) -> Option<&'static KernelSpec> {
    kernels().find(|k| k.name == name && k.arch == arch)
}

/// The self-checks of the tensor-core wrappers and intrinsics, the ceiling kernels and the
/// benchmarks' fill kernel: one spec per kernel, named after it.
pub mod tools {
    use super::{Arch, Family, KernelSpec};

    /// Each tools kernel as a named spec (`NAME`, entry point, architecture), and [`TOOLS`],
    /// all of them: one list for both.
    macro_rules! tools {
        ($(($const:ident, $name:literal, $arch:ident)),* $(,)?) => {
            $(
                #[doc = concat!(
                    "The spec of the tools kernel `", $name, "` of the [`Arch::", stringify!($arch),
                    "`] module, with no fixed block size, shared memory, register cap or cluster."
                )]
                pub const $const: KernelSpec = KernelSpec::new($name, Family::Tools, Arch::$arch);
            )*
            /// Every tools kernel.
            pub const TOOLS: &[KernelSpec] = &[$($const),*];
        };
    }

    tools!(
        (BENCH_FILL_RANDOM, "bench_fill_random", Sm80),
        (CEILING_COPY, "ceiling_copy", Sm80),
        (CEILING_L2_READ, "ceiling_l2_read", Sm80),
        (CEILING_MMA_M16N8K16_F16, "ceiling_mma_m16n8k16_f16", Sm80),
        (CEILING_MMA_M16N8K16_F16_F32, "ceiling_mma_m16n8k16_f16_f32", Sm80),
        (CEILING_MMA_M16N8K32_S8, "ceiling_mma_m16n8k32_s8", Sm80),
        (CEILING_MMA_M16N8K64_S4, "ceiling_mma_m16n8k64_s4", Sm80),
        (CEILING_MMA_M16N8K8_F16, "ceiling_mma_m16n8k8_f16", Sm80),
        (CEILING_MMA_M8N8K16_S8, "ceiling_mma_m8n8k16_s8", Sm80),
        (CEILING_MMA_SP_M16N8K16_F16, "ceiling_mma_sp_m16n8k16_f16", Sm80),
        (SELFTEST_BANK_CHECK, "selftest_bank_check", Sm80),
        (SELFTEST_F16_CONVERT, "selftest_f16_convert", Sm80),
        (SELFTEST_MMA_M16N8K16_F16, "selftest_mma_m16n8k16_f16", Sm80),
        (SELFTEST_MMA_M16N8K16_F16_F32, "selftest_mma_m16n8k16_f16_f32", Sm80),
        (SELFTEST_MMA_M16N8K32_S8, "selftest_mma_m16n8k32_s8", Sm80),
        (SELFTEST_MMA_M16N8K32_S8_SATFINITE, "selftest_mma_m16n8k32_s8_satfinite", Sm80),
        (SELFTEST_MMA_M16N8K8_F16, "selftest_mma_m16n8k8_f16", Sm80),
        (SELFTEST_MMA_M8N8K16_S8, "selftest_mma_m8n8k16_s8", Sm80),
        (SELFTEST_MMA_M8N8K16_S8_SATFINITE, "selftest_mma_m8n8k16_s8_satfinite", Sm80),
        (SELFTEST_MMA_SP_M16N8K16_F16, "selftest_mma_sp_m16n8k16_f16", Sm80),
        (SELFTEST_MMA_SP_UNIVERSAL_F16, "selftest_mma_sp_universal_f16", Sm80),
        (SELFTEST_MMA_SP_UNORDERED_M16N8K16_F16, "selftest_mma_sp_unordered_m16n8k16_f16", Sm80),
        (SELFTEST_PRMT_LOP3, "selftest_prmt_lop3", Sm80),
        (SELFTEST_SHARED, "selftest_shared", Sm80),
        (SELFTEST_SHUFFLES, "selftest_shuffles", Sm80),
        (CEILING_WGMMA_M64N256K16_F16_F32, "ceiling_wgmma_m64n256k16_f16_f32", Sm90a),
        (CEILING_WGMMA_M64N256K32_S8, "ceiling_wgmma_m64n256k32_s8", Sm90a),
        (SELFTEST_WGMMA_M64N256_F16, "selftest_wgmma_m64n256_f16", Sm90a),
        (SELFTEST_WGMMA_M64N256_S8, "selftest_wgmma_m64n256_s8", Sm90a),
    );
}
pub use tools::TOOLS;

#[cfg(test)]
mod tests {
    extern crate std;
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

    #[test]
    fn entry_names_are_read_from_the_lines_that_open_kernels() {
        assert_eq!(entry_name(".visible .entry pfb_fir_t16("), Some("pfb_fir_t16"));
        assert_eq!(entry_name("  .entry frb_quantize_u8(\t// @frb_quantize_u8"), Some("frb_quantize_u8"));
        assert_eq!(entry_name(".visible .func anon"), None);
        assert_eq!(entry_name("\tcall.uni (retval0), entry, ("), None);
    }

    #[test]
    fn registry_names_are_unique_and_carry_their_familys_prefix() {
        let all: std::vec::Vec<&KernelSpec> = kernels().collect();
        for (i, a) in all.iter().enumerate() {
            assert_eq!(Family::of_entry(a.name), Some(a.family), "{}", a.name);
            assert!(all[i + 1..].iter().all(|b| (b.name, b.arch) != (a.name, a.arch)), "{} twice", a.name);
            assert_eq!(find(a.name, a.arch), Some(*a));
        }
        for list in REGISTRY {
            assert!(list.iter().all(|k| k.family == list[0].family), "{}", list[0].name);
        }
    }
}
