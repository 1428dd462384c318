//! cuBLAS HGEMM on the resampling arrays, the peer the resampling kernels are compared with on the
//! same GPU in the same process (benches only: cudarc's `cublas` feature is a dev-dependency).
//!
//! Per channel f, `J[f]` (`[tbar][beta]`, row-major) `= I[f] W[f]^T` with I `[tbar][rho]` and
//! W `[beta][rho]` as the W path stores them. In cuBLAS's column-major terms that is
//! `C (B x T, ldc = B) = op(A) op(B)` with `A` = W read transposed (`K x B`, lda = K) and `B` =
//! I as stored (`K x T`, ldb = K): the "TN" form, which cuBLAS runs on its tensor-core
//! kernels, strided-batched over the F channels.
use cudarc::cublas::{result, sys, CudaBlas};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use radio_kernels::frb_beamformer::resample::ResampleConfig;
use radio_kernels::{DeviceBuffer, Gpu};
use std::ffi::c_void;

/// Accumulation of the products: `F32` is the resampling kernels' own arithmetic (f16
/// products summed in f32, J rounded to f16 once); `F16` sums in f16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulate {
    F32,
    F16,
}

/// A cuBLAS handle on the GPU's stream.
pub struct Hgemm {
    blas: CudaBlas,
}

impl Hgemm {
    /// `None` (with the reason printed) where libcublas cannot be loaded.
    pub fn new(gpu: &Gpu) -> Option<Hgemm> {
        // SAFETY: only probes whether the library can be opened.
        if !unsafe { sys::is_culib_present() } {
            println!("cuBLAS: libcublas not found; no measured cuBLAS rows");
            return None;
        }
        match CudaBlas::new(gpu.stream().clone()) {
            Ok(blas) => Some(Hgemm { blas }),
            Err(error) => {
                println!("cuBLAS: no handle ({error:?}); no measured cuBLAS rows");
                None
            }
        }
    }

    /// `J = I W` for every channel of `config`, W as the W path stores it (`Resampler::weights`).
    pub fn resample(
        &self,
        gpu: &Gpu,
        config: &ResampleConfig,
        accumulate: Accumulate,
        intensity: &DeviceBuffer<half::f16>,
        weights: &DeviceBuffer<half::f16>,
        out: &mut DeviceBuffer<half::f16>,
    ) {
        assert_eq!(intensity.len(), config.intensity_len(), "I");
        assert_eq!(weights.len(), config.weights_len(), "W");
        assert_eq!(out.len(), config.output_len(), "J");
        let (times, beams, k) = (config.times as i32, config.beams as i32, config.k() as i32);
        let stream = gpu.stream();
        let (w, _w_record) = weights.raw().device_ptr(stream);
        let (i, _i_record) = intensity.raw().device_ptr(stream);
        // SAFETY: the allocation is only read for its address, never replaced.
        let (j, _j_record) = unsafe { out.raw_mut() }.device_ptr_mut(stream);
        // alpha = 1 and beta = 0 in the compute type (f16 bits for F16).
        let (one32, zero32) = (1.0f32, 0.0f32);
        let (one16, zero16) = (0x3c00u16, 0u16);
        let (alpha, beta, compute) = match accumulate {
            Accumulate::F32 => (
                &one32 as *const f32 as *const c_void,
                &zero32 as *const f32 as *const c_void,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            Accumulate::F16 => (
                &one16 as *const u16 as *const c_void,
                &zero16 as *const u16 as *const c_void,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_16F,
            ),
        };
        let f16 = sys::cudaDataType_t::CUDA_R_16F;
        // SAFETY: the three buffers hold F B K, F T K and F T B halves (asserted above), which
        // is what the strides and leading dimensions below address; alpha and beta outlive the
        // call (host pointer mode, read before it returns).
        unsafe {
            result::gemm_strided_batched_ex(
                *self.blas.handle(),
                sys::cublasOperation_t::CUBLAS_OP_T,
                sys::cublasOperation_t::CUBLAS_OP_N,
                beams,
                times,
                k,
                alpha,
                w as *const c_void,
                f16,
                k,
                beams as i64 * k as i64,
                i as *const c_void,
                f16,
                k,
                times as i64 * k as i64,
                beta,
                j as *mut c_void,
                f16,
                beams,
                times as i64 * beams as i64,
                config.channels as i32,
                compute,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .expect("cublasGemmStridedBatchedEx");
    }
}
