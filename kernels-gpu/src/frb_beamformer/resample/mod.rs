//! FRB beamformer, second kernel: exact resampling of the half-integer intensity
//! `I[f][tbar][p][q]` of the first kernel to arbitrary beams,
//! `J[f][tbar][beta] = sum_{p < 2M} sum_{q < 2N} U^M_p(theta[f][beta]) U^N_q(theta'[f][beta]) I[f][tbar][p][q]`
//! (eq. 137 of Smith, CHORD FRB beamformer design note (2022)), with the stable form of its eq. 7,
//! `U^N_q(theta) = (1/N) sum_{s=0}^{N} A_s cos(pi (2 theta - q) s / N)`, `A_0 = A_N = 1/2`, else 1.
//!
//! Non-factorizable beams as one GEMM per channel, `J = I W` with
//! `W[rho][beta] = U^M_p(theta) U^N_q(theta')` and `rho = 2N p + q` (eqs. 138-140).
//! Layouts (f16 as raw `u16` bits): I `[f][tbar][rho]` (the first kernel's `[f][tbar][p][q]`),
//! W `[f][beta][rho]` (a beam's weights contiguous: the m16n8k16 B operand in column-major
//! form, so `ldmatrix` without `.trans` yields B fragments), J `[f][tbar][beta]`; beam
//! positions theta, theta' f32 `[f][beta]` in the note's grid units (eq. 1); the fused path's
//! U^M, U^N f32 `[f][x/4][beta][4]` (x = p or q).
//!
//! Two paths, the same J bit for bit:
//! - W path: the W kernel (`frb_resample_weights`, one warp per (f, beta), U in f32 from
//!   eq. 7, W rounded to f16) writes W; a GEMM reads I and W.
//! - Fused path: the U kernel (`frb_resample_u`) writes U^M and U^N (`4 F B (2M + 2N)` bytes,
//!   1/(2 MN / (M + N)) of W's), and the GEMM forms W's tiles on the chip with the W
//!   kernel's f32 product and f16 rounding, so W never exists in device memory.
//!
//! Kernels, by schedule:
//! - `ampere` (sm_80 `mma.sync`, every GPU): the W-path GEMM, CUTLASS's sm80 multistage
//!   design (a `cp.async` ring, XOR-swizzled tiles, `ldmatrix` fragments, J out through
//!   shared memory), and the fused GEMM, the same kernel with each B stage formed in shared
//!   memory from U;
//! - [`hopper`] (sm_90a `wgmma`): the W-path GEMM with 128 x 256 or 192 x 256 tiles, and the
//!   fused path as the transposed GEMM `J^T = W^T I^T` with W^T formed in registers as the
//!   `wgmma` A operand, in three forms (`cp`, `tma`, resident).
//!
//! `K = 4MN` is a multiple of 64 for every case of the note's Table 2, so no GEMM has a k edge (the
//! host checks it); ragged tbar and beam edges are zero-filled and not stored.
//!
//! Kernel names (the registry [`KERNELS`], made with the entry points from one instance list,
//! `resample_instances!`): `frb_resample_` then
//! - `weights`, `u`: the W and U kernels;
//! - `gemm`: the W-path GEMM (`_wide`: 192-row tiles); `fused`: the sm_80 fused GEMM;
//! - `fused_rsp{WG}{form}_n{N}_t{NT}`: the transposed fused kernel (RS `wgmma`: A from
//!   registers) with `WG` warpgroups of 64 beams, form `tma` (a TMA producer warpgroup),
//!   `res` (resident I) or none (`cp`: every thread's `cp.async`), grid N (M follows from N
//!   in the note's Table 2) and a tile of NT slow samples;
//! - `_sm90a`: a `wgmma` kernel of the sm_90a module.
//!
//! The host asks one descriptor per kernel ([`ResampleKernel`]: spec and role; the
//! transposed kernels' geometry [`RsKernel`]) and picks among them with [`use_wide_tile`]
//! (W path) and [`rs_default_kernel`] (fused path). Every listed kernel is the production
//! choice for some configuration the host accepts (a CPU test checks it).

pub mod layout;
pub use layout::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod ampere;
pub mod hopper;
#[cfg(target_arch = "nvptx64")]
mod store;

#[cfg(test)]
mod tests;

use crate::modules::{Arch, Family, KernelSpec};

/// What a resampling kernel does, as far as its launcher needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The W kernel: grid (beam groups of [`WEIGHT_WARPS`], channels).
    Weights,
    /// The U kernel: grid (beam groups of [`U_THREADS`], `2M + 2N`, channels).
    U,
    /// A W-path GEMM with block tiles of `rows` (tbar) x `beams`: grid (tbar tiles, beam
    /// tiles, channels); threads and shared memory in the spec.
    WPath {
        /// Block tile rows (tbar): [`GEMM`]'s `bm()` on sm_80, [`HOPPER_BM`] or [`WIDE_BM`]
        /// with `wgmma`.
        rows: u32,
        /// Block tile columns (beams).
        beams: u32,
    },
    /// The sm_80 fused GEMM: the [`GEMM`] tiling and grid, [`fused_smem_bytes`]`(M, N)` of
    /// shared memory.
    Fused,
    /// A transposed fused kernel (persistent, a 1-d grid of resident blocks).
    Transposed(RsKernel),
}

/// One resampling kernel: its registry spec (entry point, module, block size, shared memory
/// where fixed, register cap) and its role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResampleKernel {
    /// The registry entry (`frb_resample_*`).
    pub spec: KernelSpec,
    /// What the kernel computes and how its launcher sizes the grid.
    pub role: Role,
}

impl ResampleKernel {
    const fn sm80(name: &'static str, threads: u32, role: Role) -> ResampleKernel {
        ResampleKernel {
            spec: KernelSpec::new(name, Family::FrbBeamformer, Arch::Sm80).threads(threads),
            role,
        }
    }
    const fn shared(mut self, bytes: u32) -> ResampleKernel {
        self.spec = self.spec.shared_bytes(bytes);
        self
    }
    /// The `wgmma` W-path GEMM of `warpgroups` warpgroups (2: 128 x 256 tiles, 3: 192 x 256).
    const fn wgmma_gemm(name: &'static str, warpgroups: u32) -> ResampleKernel {
        let spec = KernelSpec::new(name, Family::FrbBeamformer, Arch::Sm90a);
        let (spec, rows) = if warpgroups == WIDE_WARPGROUPS {
            (
                spec.threads(WIDE_THREADS).shared_bytes(wide_smem_bytes()).max_registers(WIDE_GEMM_REGISTERS),
                WIDE_BM,
            )
        } else {
            (spec.threads(HOPPER_THREADS).shared_bytes(hopper_smem_bytes()), HOPPER_BM)
        };
        ResampleKernel { spec, role: Role::WPath { rows, beams: HOPPER_BN } }
    }
    const fn transposed(kernel: RsKernel) -> ResampleKernel {
        ResampleKernel { spec: kernel.spec(), role: Role::Transposed(kernel) }
    }
}

/// Every resampling kernel, written once: `$callback!` gets the sm_80 kernels (descriptor
/// const, entry point, role), the `wgmma` W-path GEMMs (descriptor const, entry point,
/// warpgroups) and the transposed fused kernels (entry point, warpgroups, NT, M, N, stages,
/// its RS wgmma, form: `cp`, `tma` or `res`). The registry ([`KERNELS`]), the descriptors
/// ([`RESAMPLE_KERNELS`], [`RS_KERNELS`]) and the entry points (`device`) are all made
/// from this list.
macro_rules! resample_instances {
    ($callback:ident) => {
        $callback! {
            sm80: [
                (GEMM_KERNEL, frb_resample_gemm, gemm),
                (FUSED_KERNEL, frb_resample_fused, fused),
                (U_KERNEL, frb_resample_u, u),
                (WEIGHTS_KERNEL, frb_resample_weights, weights),
            ],
            wgmma: [
                (HOPPER_GEMM_KERNEL, frb_resample_gemm_sm90a, 2),
                (WIDE_GEMM_KERNEL, frb_resample_gemm_wide_sm90a, 3),
            ],
            transposed: [
                (frb_resample_fused_rsp2_n8_t248_sm90a, 2, 248, 8, 8, 6, mma_rs_m64n248k16_f32_f16, cp),
                (frb_resample_fused_rsp2_n12_t232_sm90a, 2, 232, 8, 12, 6, mma_rs_m64n232k16_f32_f16, cp),
                (frb_resample_fused_rsp2_n12_t248_sm90a, 2, 248, 8, 12, 6, mma_rs_m64n248k16_f32_f16, cp),
                (frb_resample_fused_rsp3_n12_t184_sm90a, 3, 184, 8, 12, 7, mma_rs_m64n184k16_f32_f16, cp),
                (frb_resample_fused_rsp2tma_n16_t232_sm90a, 2, 232, 16, 16, 7, mma_rs_m64n232k16_f32_f16, tma),
                (frb_resample_fused_rsp2tma_n16_t248_sm90a, 2, 248, 16, 16, 7, mma_rs_m64n248k16_f32_f16, tma),
                (frb_resample_fused_rsp2tma_n20_t232_sm90a, 2, 232, 16, 20, 7, mma_rs_m64n232k16_f32_f16, tma),
                (frb_resample_fused_rsp2tma_n20_t248_sm90a, 2, 248, 16, 20, 7, mma_rs_m64n248k16_f32_f16, tma),
                (frb_resample_fused_rsp2tma_n24_t232_sm90a, 2, 232, 24, 24, 7, mma_rs_m64n232k16_f32_f16, tma),
                (frb_resample_fused_rsp2tma_n24_t248_sm90a, 2, 248, 24, 24, 7, mma_rs_m64n248k16_f32_f16, tma),
                (frb_resample_fused_rsp2res_n8_t232_sm90a, 2, 232, 8, 8, 6, mma_rs_m64n232k16_f32_f16, res),
                (frb_resample_fused_rsp2res_n12_t184_sm90a, 2, 184, 8, 12, 8, mma_rs_m64n184k16_f32_f16, res),
            ],
        }
    };
}

/// An instance's form flag (`cp`, `tma` or `res`) as ([`RsKernel::tma`], [`RsKernel::resident`]).
macro_rules! rs_form {
    (cp) => {
        (false, false)
    };
    (tma) => {
        (true, false)
    };
    (res) => {
        (false, true)
    };
}

/// The role of an sm_80 kernel of the instance list, by its tag.
macro_rules! sm80_kernel {
    (weights, $name:ident) => {
        ResampleKernel::sm80(stringify!($name), 32 * WEIGHT_WARPS, Role::Weights).shared(0)
    };
    (u, $name:ident) => {
        ResampleKernel::sm80(stringify!($name), U_THREADS, Role::U).shared(0)
    };
    (gemm, $name:ident) => {
        ResampleKernel::sm80(
            stringify!($name),
            GEMM.threads(),
            Role::WPath { rows: GEMM.bm(), beams: GEMM.bn() },
        )
        .shared(GEMM.smem_bytes())
    };
    (fused, $name:ident) => {
        ResampleKernel::sm80(stringify!($name), GEMM.threads(), Role::Fused)
    };
}

macro_rules! rs_kernel_const {
    ($name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $form:ident) => {
        RsKernel::new(stringify!($name), $wg, $nt, $m, $n, $s, rs_form!($form).0, rs_form!($form).1)
    };
}

macro_rules! resample_tables {
    (
        sm80: [$(($sm80:ident, $sm80_name:ident, $role:ident)),* $(,)?],
        wgmma: [$(($wgmma:ident, $wgmma_name:ident, $wg_gemm:literal)),* $(,)?],
        transposed: [$(($rs:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident, $form:ident)),* $(,)?] $(,)?
    ) => {
        $(
            #[doc = concat!("`", stringify!($sm80_name), "` (sm_80).")]
            pub const $sm80: ResampleKernel = sm80_kernel!($role, $sm80_name);
        )*
        $(
            #[doc = concat!("`", stringify!($wgmma_name), "` (sm_90a).")]
            pub const $wgmma: ResampleKernel = ResampleKernel::wgmma_gemm(stringify!($wgmma_name), $wg_gemm);
        )*
        /// Every instance of the transposed fused kernel (entry points of the sm_90a module).
        pub const RS_KERNELS: &[RsKernel] = &[$(rs_kernel_const!($rs, $wg, $nt, $m, $n, $s, $form)),*];
        /// Every resampling kernel with its role.
        pub const RESAMPLE_KERNELS: &[ResampleKernel] = &[
            $($sm80,)*
            $($wgmma,)*
            $(ResampleKernel::transposed(rs_kernel_const!($rs, $wg, $nt, $m, $n, $s, $form)),)*
        ];
        /// The resampling kernels (part of the FRB family's module): every entry point, with
        /// what `build.rs` adds to each and what the host launches it with.
        pub const KERNELS: &[KernelSpec] = &[
            $($sm80.spec,)*
            $($wgmma.spec,)*
            $(rs_kernel_const!($rs, $wg, $nt, $m, $n, $s, $form).spec(),)*
        ];
    };
}
resample_instances!(resample_tables);

/// The resampling kernel of `spec` (same entry point and module), if it is one.
pub fn kernel_of(spec: &KernelSpec) -> Option<&'static ResampleKernel> {
    RESAMPLE_KERNELS.iter().find(|k| k.spec.name == spec.name && k.spec.arch == spec.arch)
}

/// One instance of the transposed fused kernel `J^T = W^T I^T`: `warpgroups` x 64 beams
/// (wgmma's M) by a tile of `nt` slow samples (wgmma's N), grid `(M, N)` of the note's Table 2
/// (M follows from N there), a ring of `stages` I tiles of `nt` x 128 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RsKernel {
    /// The entry point (its registry entry: [`RsKernel::spec`]).
    pub name: &'static str,
    /// Consumer warpgroups of 64 beams each: the block computes `64 warpgroups` beams of a
    /// tile ([`RsKernel::beams`]); 2 or 3 in the instances.
    pub warpgroups: u32,
    /// Slow samples (tbar) per tile: wgmma's N, a multiple of 8 up to 256.
    pub nt: u32,
    /// Dish-grid rows M (of the Table 2 case with columns `n`).
    pub m: u32,
    /// Dish-grid columns N; `K = 4MN` is the GEMM's k, run in stages of 64.
    pub n: u32,
    /// Slots of the shared-memory ring of I tiles ([`RsKernel::stage_bytes`] each).
    pub stages: u32,
    /// I's stages arrive by tensor copies (TMA, a producer warpgroup) on per-slot mbarriers
    /// into the first `stages - 2` slots instead of every thread's `cp.async` and a block
    /// barrier per stage, each consumer warpgroup stages its J half in one of the last two
    /// slots and stores it by a tensor store, and warpgroup 1 starts each tile once warpgroup
    /// 0 has issued the tile's stage [`RS_TMA_LEAD`] (`hopper` module docs); the kernel then takes
    /// the tensor maps of I and J as its last parameter.
    pub tma: bool,
    /// Resident form (`K <= 64 (stages - warpgroups)`, the pathfinder grids): the tile's whole
    /// I stays in the ring while the block runs every beam tile of a (slow-sample tile,
    /// channel) unit; each warpgroup has its U a tile ahead in shared memory, stages its own
    /// J half and stores it by a tensor store (the kernel takes the tensor maps as the TMA
    /// instances do; thread stores where `beams` is not a multiple of 8), and the two take
    /// turns at the tensor cores (`hopper` module docs).
    pub resident: bool,
}

impl RsKernel {
    /// The instance `name` of this geometry and form, with its spec.
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        name: &'static str,
        warpgroups: u32,
        nt: u32,
        m: u32,
        n: u32,
        stages: u32,
        tma: bool,
        resident: bool,
    ) -> RsKernel {
        RsKernel { name, warpgroups, nt, m, n, stages, tma, resident }
    }
    /// Its registry entry ([`KERNELS`]): [`RsKernel::threads`] threads,
    /// [`RsKernel::smem_bytes`] of dynamic shared memory, the register cap
    /// [`RsKernel::max_registers`]. (Derived from the geometry, so that the kernel's own
    /// copy of the descriptor stays the plain geometry the device code folds away.)
    pub const fn spec(&self) -> KernelSpec {
        let spec = KernelSpec::new(self.name, Family::FrbBeamformer, Arch::Sm90a)
            .threads(self.threads())
            .shared_bytes(self.smem_bytes());
        match self.max_registers() {
            Some(cap) => spec.max_registers(cap),
            None => spec,
        }
    }
    /// The register cap (`.maxnreg`): the TMA instances launch at
    /// [`RS_TMA_LAUNCH_REGISTERS`] (then `setmaxnreg` moves registers to the consumers), the
    /// 3-warpgroup ones run at [`RS_WIDE_REGISTERS`]; 256-thread blocks need none (one block
    /// per SM, up to 255 registers).
    pub const fn max_registers(&self) -> Option<u32> {
        if self.tma {
            Some(RS_TMA_LAUNCH_REGISTERS)
        } else if self.warpgroups >= 3 {
            Some(RS_WIDE_REGISTERS)
        } else {
            None
        }
    }
    /// The block: the consumer warpgroups, and the TMA instances' producer warpgroup.
    pub const fn threads(&self) -> u32 {
        128 * (self.warpgroups + self.tma as u32)
    }
    /// The threads that compute, stage and store J (all but the TMA producer).
    pub const fn consumer_threads(&self) -> u32 {
        128 * self.warpgroups
    }
    /// Whether each consumer warpgroup stages its own 64-beam half of J in its own slot and
    /// stores it itself (TMA and resident forms), instead of the block staging one tile.
    pub const fn own_halves(&self) -> bool {
        self.tma || self.resident
    }
    /// Slots of the ring that hold I: all `stages`, but for the TMA form, whose last
    /// `warpgroups` slots hold J's halves.
    pub const fn ring_slots(&self) -> u32 {
        if self.tma {
            self.stages - self.warpgroups
        } else {
            self.stages
        }
    }
    /// Byte offset of J's f16 element (slow-sample row, beam) in the staged tile:
    /// [`rs_staged_offset`], or with [`RsKernel::own_halves`] [`rs_staged_offset_halves`]
    /// (the tensor stores' layout).
    pub const fn staged_offset(&self, row: u32, beam: u32) -> u32 {
        if self.own_halves() {
            rs_staged_offset_halves(row, beam, self.nt)
        } else {
            rs_staged_offset(row, beam, self.beams())
        }
    }
    /// Beams per block (wgmma rows).
    pub const fn beams(&self) -> u32 {
        64 * self.warpgroups
    }
    /// Bytes of one ring slot: an I tile of `nt` slow samples x 64 rho (one 128-byte swizzle
    /// row per sample).
    pub const fn stage_bytes(&self) -> u32 {
        self.nt * 2 * HOPPER_BK
    }
    /// Whether the tile's U^M sits in shared memory (`[p / 4][beam][4]` f32 after the ring,
    /// [`RsKernel::um_bytes`]) instead of registers: the 3-warpgroup blocks (and any
    /// 4-warpgroup one; none is instantiated), whose 168 (128) registers per thread cannot also
    /// hold two periods of U^M.
    pub const fn um_in_smem(&self) -> bool {
        self.warpgroups >= 3
    }
    /// Bytes of the tile's U^M in shared memory (0 where it stays in registers); for the
    /// resident form, both warpgroups' two buffers of U^M and U^N ([`RsKernel::u_ahead_offset`]).
    pub const fn um_bytes(&self) -> u32 {
        if self.resident {
            2 * self.warpgroups * self.u_ahead_bytes()
        } else if self.um_in_smem() {
            2 * self.m * self.beams() * 4
        } else {
            0
        }
    }
    /// Resident form: one buffer of a warpgroup's U, rows of 64 beams x 16 bytes, the `M / 2`
    /// quads of U^M then the `N / 2` of U^N (`[quad][beam][4]` f32, as the U kernel stores them).
    pub const fn u_ahead_bytes(&self) -> u32 {
        (2 * self.m + 2 * self.n) * 64 * 4
    }
    /// Offset of warpgroup `warpgroup`'s U buffer `buffer` (0, 1) after the ring.
    pub const fn u_ahead_offset(&self, warpgroup: u32, buffer: u32) -> u32 {
        self.stages * self.stage_bytes() + (2 * warpgroup + buffer) * self.u_ahead_bytes()
    }
    /// The ring and J's staged `nt` x `beams` tile in its last `warpgroups` slots (shared
    /// with I in the `cp` form, J's alone in the TMA form; the resident form's I leaves them
    /// free), then U^M or the resident form's U buffers, then the TMA form's mbarriers.
    pub const fn smem_bytes(&self) -> u32 {
        self.barrier_offset() + if self.tma { 16 * self.ring_slots() } else { 0 } + HOPPER_ALIGN_SLACK
    }
    /// Offset of the TMA kernels' mbarriers (`full` per ring slot, then `empty` per ring
    /// slot), after the ring (or J's staged tile) and U^M.
    pub const fn barrier_offset(&self) -> u32 {
        let ring = self.stages * self.stage_bytes();
        let staged = self.nt * 2 * self.beams();
        (if ring > staged { ring } else { staged }) + self.um_bytes()
    }
}

/// Whether the W-path GEMM takes the wide tile for `times` rows: when its tiles of 192 rows
/// pad no more rows than the 128-row tiles do (a last tile of at most 64 rows counting 64,
/// as it is split by beams). Full CHORD's 917 pad to 960 both ways (the wide tile pulls a
/// third less from L2 per MAC); HIRAX's 980 to 1152 against 1024. There the wide tile's last
/// row tile has one busy warpgroup (the other two skip their wgmmas), but that tile still
/// pulls its whole W tile through the ring, so the narrow tile is taken.
pub const fn use_wide_tile(times: u32) -> bool {
    let rest = times % HOPPER_BM;
    let narrow = times - rest
        + if rest == 0 {
            0
        } else if rest <= 64 {
            64
        } else {
            HOPPER_BM
        };
    times.div_ceil(WIDE_BM) * WIDE_BM <= narrow
}

/// Warpgroups of the production family of the transposed fused kernel.
pub const RS_DEFAULT_WARPGROUPS: u32 = 2;
/// Its slow-sample tiles (instances for every grid).
pub const RS_DEFAULT_TILES: [u32; 2] = [232, 248];

/// Warpgroups and slow-sample tile of the 192-beam instances (U^M in shared memory), which
/// exist for the grid where they pad no more work than the 128-beam ones (N = 12).
pub const RS_WIDE_WARPGROUPS: u32 = 3;
/// Slow-sample tile of the 192-beam instances: `nt` of [`RS_WIDE_WARPGROUPS`]-warpgroup
/// kernels (see [`RS_WIDE_WARPGROUPS`]).
pub const RS_WIDE_TILE: u32 = 184;

/// The production instance of the transposed fused kernel for grid (M, N), `times` rows and
/// `beams` beams, the first of:
/// - the resident instance, where one exists for N (the pathfinder grids, N = 8 and 12) and
///   its tile pads no more rows than the 2-warpgroup tile of [`rs_pick_tile`] (917 -> 928
///   and 920): I crosses L2 once per slow-sample tile instead of once per beam tile;
/// - the TMA instance of that tile, where one exists (N = 16, 20 and 24: HIRAX and full
///   CHORD): no copies or block barriers in the consumers' main loop;
/// - the 3-warpgroup instance (192 beams: a third less I pulled from L2 per MAC) where one
///   exists for N (12) and its tiles pad no more work (padded rows x padded beams) than the
///   2-warpgroup one;
/// - the 2-warpgroup `cp` instance of that tile.
///
/// Every instance of [`RS_KERNELS`] is this choice for some configuration (the `cp`
/// instances of N = 16, 20, 24, the 3-warpgroup one of N = 24 and the `cp` N = 8 tile of 232,
/// which the TMA or resident instances always displace, are not built).
pub fn rs_default_kernel(n: u32, times: u32, beams: u32) -> Option<&'static RsKernel> {
    let nt = rs_pick_tile(times, &RS_DEFAULT_TILES);
    let padded_rows = |tile: u32| times.div_ceil(tile) * tile;
    if let Some(resident) =
        RS_KERNELS.iter().find(|k| k.n == n && k.resident && padded_rows(k.nt) <= padded_rows(nt))
    {
        return Some(resident);
    }
    let narrow = |tma: bool| {
        RS_KERNELS.iter().find(|k| {
            k.n == n && k.nt == nt && k.warpgroups == RS_DEFAULT_WARPGROUPS && k.tma == tma && !k.resident
        })
    };
    if let Some(tma) = narrow(true) {
        return Some(tma);
    }
    let narrow = narrow(false)?;
    let padded = |k: &RsKernel| padded_rows(k.nt) as u64 * (beams.div_ceil(k.beams()) * k.beams()) as u64;
    match RS_KERNELS.iter().find(|k| k.n == n && k.warpgroups == RS_WIDE_WARPGROUPS) {
        Some(wide) if padded(wide) <= padded(narrow) => Some(wide),
        _ => Some(narrow),
    }
}

// The entry points, from the same instance list (after the macros, which they use).
#[cfg(target_arch = "nvptx64")]
mod device;
#[cfg(target_arch = "nvptx64")]
pub use device::*;
