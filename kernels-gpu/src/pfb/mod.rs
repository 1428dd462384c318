//! PFB channelizer (F-engine; after Merry, "Efficient channelization on a graphics processing
//! unit"): packed real samples of two polarisations to channel-major complex int8 (or int4)
//! heaps.
//!
//! For spectrum m and polarisation p, with n channels, T taps and coarse delay c:
//! `g[t] = sum_j s[2nm - c + t + 2nj] w[t + 2nj]` for `0 <= t < 2n`;
//! `X[k] = sum_t g[t] exp(-j pi k t / n)` for `0 <= k < n` (Nyquist dropped);
//! `y[k] = Q( gain[p][k] exp(j pi (phase - fine k / n)) X[k] )` with `phase` in half turns and
//! `fine` the residual delay in samples, `Q` = round half to even, saturate to [-127, 127]
//! (int8) or [-7, 7] (int4).
//!
//! Three kernels: the FIR (`fir`) writes `z[q] = g[2q] + j g[2q+1]` already "unzipped"
//! (factor [`UNZIP`] = 4): `z[4 q1 + q2]` goes to row q2, column q1 of a `4 x n/4` matrix
//! ([`fft_index`]), so cuFFT runs `n/4`-point C2C transforms on contiguous rows. The
//! post-processing kernel (`post`) finishes the transform: twiddles and a 4-point DFT across
//! the rows give `Z = FFT_n(z)` (six-step FFT, steps 3-6), then the R2C fix-up
//! `X[k] = (Z[k] + Z*[n-k]) / 2 - j/2 exp(-j pi k / n) (Z[k] - Z*[n-k])`.
//! A post thread owns column `u` and its mirror `n/4 - u` ([`post_thread_columns`]: u from 1
//! to n/8, whose mirror is itself), because channel `u + a v` needs `Z[n - k]`, which lies in
//! the mirror column; so each thread does two 4-point DFTs. Column 0 is its
//! own mirror: the blocks of the first column tile compute it apart, one (spectrum,
//! polarisation) per thread, so no warp runs two code paths. A post block is a tile of 16
//! columns by 8 groups of spectra ([`POST_TILE_LOG2`]); it stages its columns' gains, halved,
//! in shared memory once, and computes twice the R2C fix-up ([`r2c_fixup_pair_x2`]), which gives
//! the same products bit for bit without the four halvings of each mirrored pair of channels
//! (the pair shares its halves and its complex product).
//!
//! Layouts: input per polarisation, `bits`-wide two's complement packed MSB-first (sample i is
//! bits `i bits .. (i + 1) bits` of the byte stream, bit 0 the MSB of byte 0), read as
//! little-endian u32 words ([`unpack_pair`]). FIR output / FFT buffers: complex f32
//! `[pol][spectrum][row 4][column n/4]`. Output: complex int8 `[heap][channel][spectrum][pol]`
//! (int4: one byte per complex value, real in the low nibble, as `packing::pack_ci4`);
//! saturation counts u32 `[heap][pol]` (a value counts when either component clipped).
//!
//! FIR: a block is a tile of [`fir_block_width`] column pairs and a run of spectra;
//! per batch of [`fir_batch`] spectra it copies the batch's new input rows, still packed, into
//! a ring slot of shared memory with `cp.async` ([`FIR_STAGES`]` - 1` batches ahead, so the
//! bytes in flight take no registers), each thread unpacks its pair of each new row
//! ([`fir_row_start`], [`fir_row_word`]) into its slice of a window ring in shared memory
//! ([`FIR_RING_ROW`]) and streams the window against its weights in registers. At 16 taps
//! ([`fir_warp_rows`]) the window itself stays in registers (no ring), and each warp of a
//! block computes pairs of one row of the unzipped output ([`fir_pair_of_thread`]), so its
//! stores are contiguous.
//!
//! Why no shared-memory transpose across threads: a post thread owns
//! [`SPECTRA_PER_POST_THREAD`] consecutive spectra of its 8 channels, so the channel-major
//! output leaves as 16-byte pieces (8 for int4) per channel; the transpose happens in each
//! thread's private shared-memory scratch ([`post_scratch_word`]).
//!
//! Fused path: [`cluster`] (sm_90a, n = 1024: the three kernels' factorisation over a 4-block
//! cluster in one kernel, the rows exchanged through distributed shared memory, the row FFTs
//! by [`stockham`]). Elsewhere the three kernels run: on Ampere always, on Hopper for every
//! configuration the cluster kernel does not take.
//!
//! Coarse delay is an index offset per spectrum and polarisation read by the FIR
//! kernel; where it changes, the thread reloads its window instead of sliding it, so one
//! launch serves any delay track.
//!
//! Kernel names ([`PFB_KERNELS`]): `pfb_fir_t{T}` is the FIR compiled for T taps (a PFB of
//! fewer taps runs it with zero weights in front), `pfb_post_ci{8,4}` the post-processing for
//! int8 or int4 output, `pfb_cluster_t{T}_ci{8,4}` the sm_90a cluster kernel for T taps and
//! that output. The host picks a [`PfbKernel`] (it carries the kernel's [`KernelSpec`]) and
//! derives each launch's shared memory from it ([`PfbKernel::shared_bytes`]).
//!
//! Files: `layout` (indices, sizes and the sample unpacker, shared with the host), `arith`
//! (the post-processing arithmetic, identical on the host and the device), `fir` and `post`
//! (the sm_80 kernels' bodies), `cluster` (the sm_90a kernel), `stockham` (its row FFT),
//! `device` (the entry points, generated from `pfb_instances!` with the registry).

use crate::modules::{Arch, Family, KernelSpec};

mod arith;
pub mod cluster;
mod device;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod fir;
mod layout;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod post;
pub mod stockham;

pub use arith::*;
pub use layout::*;

/// Supported sample widths in bits.
pub const BITS: [u32; 5] = [4, 8, 10, 12, 16];
/// Unzip factor b of the six-step FFT.
pub const UNZIP: u32 = 4;
/// Smallest and largest channel counts (powers of two).
pub const MIN_CHANNELS: u32 = 64;
/// Largest channel count n, 2^16: configurations take powers of two in
/// `MIN_CHANNELS..=MAX_CHANNELS`.
pub const MAX_CHANNELS: u32 = 65536;
/// Most taps.
pub const MAX_TAPS: u32 = 32;
/// Tap counts with a compiled FIR kernel; a PFB of T taps uses the smallest one >= T, with
/// zero weights in front (those samples are never loaded).
pub const FIR_VARIANTS: [u32; 5] = [1, 4, 8, 16, 32];
/// Threads per block of both kernels.
pub const THREADS: u32 = 128;
/// Spectra one post-processing thread handles (so the heap size must be a multiple).
pub const SPECTRA_PER_POST_THREAD: u32 = 4;
/// Input buffers are u32 words; every launch's sample base is a multiple of this.
pub const SAMPLE_GRANULE: u32 = 32;

/// Register cap of the post kernels (`.maxnreg`): 96 gives five blocks of [`THREADS`] per SM
/// without spilling (uncapped, ptxas gives the int8 kernel 128 registers on sm_90: four
/// blocks). The FIRs are uncapped: the 16-tap FIR with batches of 16 takes 128 registers on
/// sm_90 (four blocks per SM), and a cap of 96 for five blocks spilled. The cluster kernels
/// launch at [`cluster::CLUSTER_LAUNCH_REGISTERS`] (then `setmaxnreg`).
pub const POST_MAX_REGISTERS: u32 = 96;

/// Every PFB kernel, written once: `$callback!` gets the FIR instances (entry point, compiled
/// taps), the post instances (entry point, int4 output) and the cluster instances (entry
/// point, compiled taps, int4 output). [`PFB_KERNELS`] (and so [`KERNELS`]) and the entry
/// points (`device`) are both made from this list.
macro_rules! pfb_instances {
    ($callback:ident) => {
        $callback! {
            fir: [(pfb_fir_t1, 1), (pfb_fir_t4, 4), (pfb_fir_t8, 8), (pfb_fir_t16, 16), (pfb_fir_t32, 32)],
            post: [(pfb_post_ci8, false), (pfb_post_ci4, true)],
            cluster: [
                (pfb_cluster_t1_ci8, 1, false),
                (pfb_cluster_t4_ci8, 4, false),
                (pfb_cluster_t8_ci8, 8, false),
                (pfb_cluster_t16_ci8, 16, false),
                (pfb_cluster_t1_ci4, 1, true),
                (pfb_cluster_t4_ci4, 4, true),
                (pfb_cluster_t8_ci4, 8, true),
                (pfb_cluster_t16_ci4, 16, true),
            ],
        }
    };
}
// Used by `device` (nvptx64 only).
#[allow(unused_imports)]
pub(crate) use pfb_instances;

/// What a PFB kernel computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfbStage {
    /// The FIR of the three-kernel path (sm_80 module).
    Fir,
    /// The post-processing of the three-kernel path (sm_80 module).
    Post,
    /// FIR, row FFTs and post-processing in one cluster kernel (sm_90a module, n =
    /// [`cluster::CLUSTER_CHANNELS`]).
    Cluster,
}

/// One PFB kernel: its registry entry and what the host needs to launch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfbKernel {
    /// The kernel's registry entry: entry point, module, block size, register cap and cluster
    /// shape (the same value [`KERNELS`] lists).
    pub spec: KernelSpec,
    /// Which part of the channelizer the kernel computes.
    pub stage: PfbStage,
    /// Compiled tap count (FIR and cluster kernels: a PFB of fewer taps runs with zero
    /// weights in front); 0 for the post kernels.
    pub taps: u32,
    /// int4 output (post and cluster kernels); false for the FIRs.
    pub int4: bool,
}

impl PfbKernel {
    /// A FIR: block size and shared memory follow from the configuration
    /// ([`fir_block_width`], [`PfbKernel::shared_bytes`]).
    const fn fir_instance(name: &'static str, taps: u32) -> PfbKernel {
        let spec = KernelSpec::new(name, Family::Pfb, Arch::Sm80);
        PfbKernel { spec, stage: PfbStage::Fir, taps, int4: false }
    }

    const fn post_instance(name: &'static str, int4: bool) -> PfbKernel {
        let spec = KernelSpec::new(name, Family::Pfb, Arch::Sm80)
            .threads(THREADS)
            .shared_bytes(POST_SHARED_BYTES)
            .max_registers(POST_MAX_REGISTERS);
        PfbKernel { spec, stage: PfbStage::Post, taps: 0, int4 }
    }

    /// A cluster kernel: shared memory follows from the sample width
    /// ([`cluster::cluster_shared_bytes`]).
    const fn cluster_instance(name: &'static str, taps: u32, int4: bool) -> PfbKernel {
        let spec = KernelSpec::new(name, Family::Pfb, Arch::Sm90a)
            .threads(cluster::CLUSTER_BLOCK_THREADS)
            .max_registers(cluster::CLUSTER_LAUNCH_REGISTERS)
            .cluster(cluster::CLUSTER_BLOCKS, 1, 1);
        PfbKernel { spec, stage: PfbStage::Cluster, taps, int4 }
    }

    /// The FIR for a PFB of `taps` taps: the smallest compiled tap count `>= taps`
    /// ([`fir_variant`]); `None` past [`MAX_TAPS`].
    pub fn fir(taps: u32) -> Option<&'static PfbKernel> {
        PFB_KERNELS.iter().filter(|k| k.stage == PfbStage::Fir && k.fits_taps(taps)).min_by_key(|k| k.taps)
    }

    /// The post-processing kernel for int8 or int4 output.
    pub fn post(int4: bool) -> Option<&'static PfbKernel> {
        PFB_KERNELS.iter().find(|k| k.stage == PfbStage::Post && k.int4 == int4)
    }

    /// The cluster kernel for a PFB of `taps` taps (the smallest compiled count `>= taps`);
    /// `None` past [`cluster::CLUSTER_MAX_TAPS`].
    pub fn cluster(taps: u32, int4: bool) -> Option<&'static PfbKernel> {
        PFB_KERNELS
            .iter()
            .filter(|k| k.stage == PfbStage::Cluster && k.int4 == int4 && k.fits_taps(taps))
            .min_by_key(|k| k.taps)
    }

    /// The PFB kernel of `spec`, if it is one.
    pub fn of(spec: &KernelSpec) -> Option<&'static PfbKernel> {
        PFB_KERNELS.iter().find(|k| k.spec == *spec)
    }

    /// Whether the kernel runs a PFB of `taps` taps (its compiled count, zero weights in
    /// front); always for the post kernels.
    pub const fn fits_taps(&self, taps: u32) -> bool {
        match self.stage {
            PfbStage::Post => true,
            PfbStage::Fir | PfbStage::Cluster => taps >= 1 && taps <= self.taps,
        }
    }

    /// Threads per block of a launch at `channels` channels ([`KernelSpec::threads`] where the
    /// kernel fixes it).
    pub const fn block_threads(&self, channels: u32) -> u32 {
        match self.stage {
            PfbStage::Fir => fir_block_width(channels),
            PfbStage::Post => THREADS,
            PfbStage::Cluster => cluster::CLUSTER_BLOCK_THREADS,
        }
    }

    /// Dynamic shared memory of a launch for `bits`-bit input and `channels` channels.
    pub const fn shared_bytes(&self, bits: u32, channels: u32) -> u32 {
        match self.stage {
            PfbStage::Fir => fir_shared_bytes(bits, fir_block_width(channels), self.taps),
            PfbStage::Post => POST_SHARED_BYTES,
            PfbStage::Cluster => cluster::cluster_shared_bytes(bits),
        }
    }

    /// The most dynamic shared memory any launch of the kernel needs (the widest input, full
    /// blocks): the limit to raise on its function, which every channelizer of a GPU shares.
    pub const fn max_shared_bytes(&self) -> u32 {
        match self.stage {
            PfbStage::Fir => fir_shared_bytes(16, THREADS, self.taps),
            PfbStage::Post => POST_SHARED_BYTES,
            PfbStage::Cluster => cluster::cluster_shared_bytes(cluster::CLUSTER_MAX_BITS),
        }
    }
}

macro_rules! pfb_table {
    (
        fir: [$(($fir:ident, $fir_taps:literal)),* $(,)?],
        post: [$(($post:ident, $post_int4:literal)),* $(,)?],
        cluster: [$(($cl:ident, $cl_taps:literal, $cl_int4:literal)),* $(,)?] $(,)?
    ) => {
        /// Every PFB kernel with its launch facts, in the order FIRs (tap counts ascending),
        /// posts, cluster kernels.
        pub const PFB_KERNELS: &[PfbKernel] = &[
            $(PfbKernel::fir_instance(stringify!($fir), $fir_taps),)*
            $(PfbKernel::post_instance(stringify!($post), $post_int4),)*
            $(PfbKernel::cluster_instance(stringify!($cl), $cl_taps, $cl_int4),)*
        ];
    };
}
pfb_instances!(pfb_table);

const fn specs<const N: usize>() -> [KernelSpec; N] {
    let mut out = [PFB_KERNELS[0].spec; N];
    let mut i = 0;
    while i < N {
        out[i] = PFB_KERNELS[i].spec;
        i += 1;
    }
    out
}

/// The family's registry (`crate::modules::REGISTRY`): every entry point of its PTX modules,
/// with the register cap and cluster shape `build.rs` emits and the block size and shared
/// memory where the kernel fixes them ([`PFB_KERNELS`]' specs).
pub const KERNELS: &[KernelSpec] = &specs::<{ PFB_KERNELS.len() }>();

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn descriptors_match_the_compiled_variants() {
        let firs: std::vec::Vec<u32> =
            PFB_KERNELS.iter().filter(|k| k.stage == PfbStage::Fir).map(|k| k.taps).collect();
        assert_eq!(firs, FIR_VARIANTS);
        for taps in 1..=MAX_TAPS {
            let fir = PfbKernel::fir(taps).unwrap();
            assert_eq!(fir.taps, fir_variant(taps));
            assert_eq!(fir.spec.name, std::format!("pfb_fir_t{}", fir.taps));
            for int4 in [false, true] {
                let post = PfbKernel::post(int4).unwrap();
                assert_eq!(post.spec.name, if int4 { "pfb_post_ci4" } else { "pfb_post_ci8" });
                match PfbKernel::cluster(taps, int4) {
                    Some(k) => {
                        assert!(taps <= cluster::CLUSTER_MAX_TAPS);
                        assert_eq!(k.taps, fir_variant(taps));
                        let format = if int4 { "ci4" } else { "ci8" };
                        assert_eq!(k.spec.name, std::format!("pfb_cluster_t{}_{format}", k.taps));
                    }
                    None => assert!(taps > cluster::CLUSTER_MAX_TAPS),
                }
            }
        }
        assert_eq!(PfbKernel::fir(0), None);
        assert_eq!(PfbKernel::fir(MAX_TAPS + 1), None);
        for k in PFB_KERNELS {
            assert_eq!(PfbKernel::of(&k.spec), Some(k));
            for channels in [MIN_CHANNELS, cluster::CLUSTER_CHANNELS, MAX_CHANNELS] {
                if let Some(threads) = k.spec.threads {
                    assert_eq!(threads, k.block_threads(channels), "{}", k.spec.name);
                }
                for bits in BITS {
                    let shared = k.shared_bytes(bits, channels);
                    assert!(k.spec.shared_bytes.is_none_or(|s| s == shared), "{}", k.spec.name);
                    let fits = k.stage != PfbStage::Cluster || bits <= cluster::CLUSTER_MAX_BITS;
                    assert!(
                        !fits || shared <= k.max_shared_bytes(),
                        "{} {bits}-bit n {channels}",
                        k.spec.name
                    );
                }
            }
        }
        assert_eq!(KERNELS.len(), PFB_KERNELS.len());
        assert!(KERNELS.iter().zip(PFB_KERNELS).all(|(s, k)| *s == k.spec));
    }
}
