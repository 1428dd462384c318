//! The channelizer's kernels: which path runs (three kernels or the cluster kernel), the
//! kernel selection from one [`KernelSpec`] (`Channelizer::with_kernel`), loading them and
//! their launches.
use super::*;

/// Which kernels a [`Channelizer`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PfbPath {
    /// One kernel (FIR, FFT and post-processing with the spectra on chip): the cluster kernel
    /// (`radio_kernels_gpu::pfb::cluster`: sm_90a, n = 1024, at most 16 taps and 12-bit
    /// input, heaps of whole batches of 8 spectra).
    Fused,
    /// FIR, cuFFT C2C and post-processing kernels (any configuration).
    ThreeKernel,
}

impl PfbPath {
    /// The default: the fused path where the cluster kernel applies ([`cluster_kernel_applies`]),
    /// else the three-kernel path (always on Ampere).
    pub fn for_config(gpu: &Gpu, config: &ChannelizerConfig) -> PfbPath {
        if cluster_kernel_applies(gpu, config) {
            PfbPath::Fused
        } else {
            PfbPath::ThreeKernel
        }
    }

    /// The kernel that selects this path for `config` in [`Channelizer::with_kernel`]: the
    /// FIR for its taps, or the cluster kernel. [`Error::InvalidConfig`] on the fused path
    /// where the cluster kernel does not apply, or for taps no kernel is compiled for.
    pub fn kernel(self, gpu: &Gpu, config: &ChannelizerConfig) -> Result<&'static KernelSpec> {
        let int4 = config.output == OutputFormat::Ci4;
        let kernel = match self {
            PfbPath::ThreeKernel => PfbKernel::fir(config.taps),
            PfbPath::Fused => {
                check_cluster(gpu, config)?;
                PfbKernel::cluster(config.taps, int4)
            }
        };
        kernel.map(|k| &k.spec).ok_or_else(|| {
            Error::InvalidConfig(format!("no {self:?} PFB kernel is compiled for {} taps", config.taps))
        })
    }
}

/// Whether the cluster kernel applies: the sm_90a kernels are in use, n is
/// [`cluster_layout::CLUSTER_CHANNELS`], at most [`cluster_layout::CLUSTER_MAX_TAPS`] taps and
/// [`cluster_layout::CLUSTER_MAX_BITS`]-bit input, and heaps are whole batches.
pub fn cluster_kernel_applies(gpu: &Gpu, config: &ChannelizerConfig) -> bool {
    check_cluster(gpu, config).is_ok()
}

/// [`cluster_kernel_applies`], saying why not.
fn check_cluster(gpu: &Gpu, config: &ChannelizerConfig) -> Result<()> {
    use cluster_layout::*;
    let why = if !gpu.wgmma_enabled() {
        "the sm_90a kernels, which this GPU does not run (or are turned off)".to_string()
    } else if config.channels != CLUSTER_CHANNELS {
        format!("n = {CLUSTER_CHANNELS}, not {}", config.channels)
    } else if config.taps > CLUSTER_MAX_TAPS {
        format!("at most {CLUSTER_MAX_TAPS} taps, not {}", config.taps)
    } else if config.bits > CLUSTER_MAX_BITS {
        format!("at most {CLUSTER_MAX_BITS}-bit input, not {}-bit", config.bits)
    } else if !config.spectra_per_heap.is_multiple_of(CLUSTER_BATCH) {
        format!("heaps of a multiple of {CLUSTER_BATCH} spectra, not {}", config.spectra_per_heap)
    } else {
        return Ok(());
    };
    Err(Error::InvalidConfig(format!("the cluster PFB kernel needs {why}")))
}

/// The kernels a channelizer runs, chosen from one spec ([`select`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Selection {
    Three { fir: &'static PfbKernel, post: &'static PfbKernel },
    Cluster(&'static PfbKernel),
}

/// The kernels for `config` named by `spec`: a FIR (with the post kernel of the output
/// format), a post kernel (with the FIR for the taps) or a cluster kernel. Typed errors for a
/// spec that is not a PFB kernel or does not fit the configuration (taps past its compiled
/// count, the other output format, a cluster kernel where it does not apply).
pub(super) fn select(gpu: &Gpu, config: &ChannelizerConfig, spec: &KernelSpec) -> Result<Selection> {
    let kernel = PfbKernel::of(spec)
        .ok_or_else(|| Error::InvalidConfig(format!("{} is not a PFB kernel", spec.name)))?;
    let int4 = config.output == OutputFormat::Ci4;
    if !kernel.fits_taps(config.taps) {
        return Err(Error::InvalidConfig(format!(
            "{} is compiled for at most {} taps, the configuration has {}",
            spec.name, kernel.taps, config.taps
        )));
    }
    if kernel.stage != PfbStage::Fir && kernel.int4 != int4 {
        return Err(Error::InvalidConfig(format!(
            "{} writes the other output format than the configuration's {:?}",
            spec.name, config.output
        )));
    }
    let missing = |what: &str| Error::InvalidConfig(format!("no PFB {what} kernel for this configuration"));
    Ok(match kernel.stage {
        PfbStage::Fir => {
            Selection::Three { fir: kernel, post: PfbKernel::post(int4).ok_or_else(|| missing("post"))? }
        }
        PfbStage::Post => {
            Selection::Three { fir: PfbKernel::fir(config.taps).ok_or_else(|| missing("FIR"))?, post: kernel }
        }
        PfbStage::Cluster => {
            check_cluster(gpu, config)?;
            Selection::Cluster(kernel)
        }
    })
}

/// Loads `kernel` and raises its shared-memory limit to the most any channelizer of this GPU
/// needs (the function is shared by all of them).
fn load(gpu: &Gpu, kernel: &PfbKernel) -> Result<CudaFunction> {
    let function = gpu.kernel(&kernel.spec)?;
    allow_dynamic_shared(&function, kernel.max_shared_bytes(), "raising a PFB kernel's shared-memory limit")?;
    Ok(function)
}

/// The three-kernel path's kernels, cuFFT plan and intermediate buffers.
pub(super) struct ThreeKernel {
    pub(super) fir: (CudaFunction, &'static PfbKernel),
    pub(super) post: (CudaFunction, &'static PfbKernel),
    pub(super) fft: FftPlan,
    pub(super) fir_out: DeviceBuffer<Complex<f32>>,
    pub(super) fft_out: DeviceBuffer<Complex<f32>>,
}

/// The cluster kernel, its twiddle table `exp(-j pi k / n)` (`k < 2n`, f64 rounded to f32)
/// and the clusters that are resident at once.
pub(super) struct Cluster {
    pub(super) kernel: (CudaFunction, &'static PfbKernel),
    pub(super) twiddles: DeviceBuffer<Complex<f32>>,
    pub(super) clusters: u32,
}

/// The cluster kernel's twiddle table for `channels`: `exp(-j pi k / n)` for `k < 2n`. Errors
/// unless `channels` is a power of two in `MIN_CHANNELS ..= MAX_CHANNELS`.
pub fn fused_twiddles(channels: u32) -> Result<Vec<Complex<f32>>> {
    if !channels.is_power_of_two() || !(MIN_CHANNELS..=MAX_CHANNELS).contains(&channels) {
        return Err(Error::InvalidConfig(format!(
            "channels must be a power of two in {MIN_CHANNELS}..={MAX_CHANNELS}, got {channels}"
        )));
    }
    Ok((0..2 * channels as u64)
        .map(|k| {
            let (s, c) = (-std::f64::consts::PI * k as f64 / channels as f64).sin_cos();
            Complex::new(c as f32, s as f32)
        })
        .collect())
}

/// The kernels and the state they share across chunks: the three-kernel path's or the
/// cluster kernel, the weights and the gains.
pub(super) struct Kernels {
    pub(super) three: Option<ThreeKernel>,
    pub(super) cluster: Option<Cluster>,
    pub(super) weights: DeviceBuffer<f32>,
    pub(super) gains: DeviceBuffer<Complex<f32>>,
}

/// The buffers one output chunk's launches read and write: the kept input, the chunk's
/// schedule (offsets into the kept input, fine delays, rotations, `2 x spectra_per_chunk`
/// each, polarisation 0 first) and its output and saturation counts.
pub(super) struct Launch<'a> {
    pub(super) inputs: &'a [DeviceBuffer<u32>; 2],
    pub(super) offsets: &'a DeviceBuffer<u32>,
    pub(super) fine: &'a DeviceBuffer<f32>,
    pub(super) rotation: &'a DeviceBuffer<[f32; 4]>,
    pub(super) output: &'a mut DeviceBuffer<u8>,
    pub(super) saturated: &'a mut DeviceBuffer<u32>,
}

/// The three-kernel path's state, or a typed error on the fused path (a function of the field,
/// so that callers can borrow the other kernel state beside it).
pub(super) fn three_kernel(three: &mut Option<ThreeKernel>) -> Result<&mut ThreeKernel> {
    three.as_mut().ok_or_else(|| {
        Error::InvalidConfig("the three-kernel launches need a channelizer on PfbPath::ThreeKernel".into())
    })
}

impl Kernels {
    /// Loads the kernels of `selection` for `config` and allocates the three-kernel path's
    /// intermediates (`values` complex values each) or the cluster kernel's twiddles.
    pub(super) fn new(
        gpu: &Gpu,
        config: &ChannelizerConfig,
        selection: Selection,
        weights: &[f32],
    ) -> Result<Kernels> {
        let spectra = config.spectra_per_chunk() as usize;
        let values = 2 * spectra * config.channels as usize;
        let (three, cluster) = match selection {
            Selection::Three { fir, post } => {
                let three = ThreeKernel {
                    fir: (load(gpu, fir)?, fir),
                    post: (load(gpu, post)?, post),
                    fft: FftPlan::new(gpu, config.channels / UNZIP, 2 * spectra as u32 * UNZIP)?,
                    fir_out: gpu.alloc(values, 0)?,
                    fft_out: gpu.alloc(values, 0)?,
                };
                (Some(three), None)
            }
            Selection::Cluster(kernel) => {
                let function = load(gpu, kernel)?;
                let probe = launch_1d(
                    cluster_layout::CLUSTER_BLOCKS,
                    kernel.block_threads(config.channels),
                    kernel.shared_bytes(config.bits, config.channels),
                );
                let clusters = function
                    .occupancy_max_active_clusters(probe, gpu.stream())
                    .during("querying the cluster PFB kernel's resident clusters")?;
                if clusters == 0 {
                    return Err(Error::InvalidConfig(
                        "the cluster PFB kernel cannot be resident on this GPU".into(),
                    ));
                }
                let twiddles = gpu.upload(&fused_twiddles(config.channels)?)?;
                (None, Some(Cluster { kernel: (function, kernel), twiddles, clusters }))
            }
        };
        Ok(Kernels {
            three,
            cluster,
            weights: gpu.upload(weights)?,
            gains: gpu.upload(&vec![Complex::new(1.0f32, 0.0); 2 * config.channels as usize])?,
        })
    }

    /// Every launch of one output chunk on `stream`, the intermediates and output poisoned
    /// first with `poison`, if any.
    pub(super) fn run(
        &mut self,
        c: &ChannelizerConfig,
        mut l: Launch<'_>,
        poison: Option<u8>,
        stream: &Stream,
    ) -> Result<()> {
        if let Some(byte) = poison {
            if let Some(three) = &mut self.three {
                three.fir_out.poison_on(stream, byte)?;
                three.fft_out.poison_on(stream, byte)?;
            }
            l.output.poison_on(stream, byte)?;
        }
        if self.cluster.is_some() {
            return self.fused(c, &mut l, stream);
        }
        self.fir(c, &l, stream)?;
        self.fft(stream)?;
        self.post(c, &mut l, stream)
    }

    /// The cluster kernel; clears the saturation counts first.
    pub(super) fn fused(&self, c: &ChannelizerConfig, l: &mut Launch<'_>, stream: &Stream) -> Result<()> {
        let Some(cluster) = &self.cluster else {
            return Err(Error::InvalidConfig("run_fused needs a channelizer on PfbPath::Fused".into()));
        };
        let (function, kernel) = &cluster.kernel;
        let spectra = c.spectra_u32();
        let g = cluster_layout::CLUSTER_BATCH;
        l.saturated.poison_on(stream, 0)?;
        // One wave, each cluster a run of whole batches (g divides the heap and so the chunk).
        let batches = spectra / g;
        let run = batches.div_ceil(cluster.clusters.min(batches)) * g;
        let cfg = launch_1d(
            cluster_layout::CLUSTER_BLOCKS * spectra.div_ceil(run),
            kernel.block_threads(c.channels),
            kernel.shared_bytes(c.bits, c.channels),
        );
        let mut launch = stream.launch_builder(function);
        launch
            .arg(l.inputs[0].raw())
            .arg(l.inputs[1].raw())
            .arg(l.offsets.raw())
            .arg(self.weights.raw())
            .arg(cluster.twiddles.raw())
            .arg(self.gains.raw())
            .arg(l.fine.raw())
            .arg(l.rotation.raw())
            .arg(l.output.arg_mut())
            .arg(l.saturated.arg_mut())
            .arg(&c.taps)
            .arg(&spectra)
            .arg(&c.spectra_per_heap)
            .arg(&c.bits)
            .arg(&run);
        // SAFETY: matches `pfb_cluster_t*_ci*(input0, input1, offsets, weights, twiddles, gains,
        // fine, rotation, out, saturated, taps, spectra, spectra_per_heap, bits, run)` (n = 1024,
        // heap and run whole batches: `select`); the callers checked every window lies in the
        // inputs; twiddles hold 2n values, the schedule 2 x spectra entries each, the output
        // and saturation counts a chunk's (every `Launch` is built from buffers of those sizes).
        unsafe { launch.launch(cfg) }.during("launching the cluster PFB kernel")?;
        Ok(())
    }

    /// The FIR launch.
    pub(super) fn fir(&mut self, c: &ChannelizerConfig, l: &Launch<'_>, stream: &Stream) -> Result<()> {
        let weights = &self.weights;
        let three = three_kernel(&mut self.three)?;
        let (function, kernel) = &three.fir;
        let spectra = c.spectra_u32();
        let per_thread = layout::fir_spectra_per_thread(c.channels, c.taps, spectra);
        let width = kernel.block_threads(c.channels);
        let threads = c.channels as u64 * spectra.div_ceil(per_thread) as u64;
        let cfg = LaunchConfig {
            // `width` divides n, so a block's threads share their spectra.
            grid_dim: ((threads / width as u64) as u32, 2, 1),
            block_dim: (width, 1, 1),
            shared_mem_bytes: kernel.shared_bytes(c.bits, c.channels),
        };
        let mut launch = stream.launch_builder(function);
        launch
            .arg(l.inputs[0].raw())
            .arg(l.inputs[1].raw())
            .arg(l.offsets.raw())
            .arg(weights.raw())
            .arg(three.fir_out.arg_mut())
            .arg(&c.channels)
            .arg(&c.taps)
            .arg(&spectra)
            .arg(&per_thread)
            .arg(&c.bits);
        // SAFETY: matches `pfb_fir_t*(input0, input1, offsets, weights, out, channels, taps,
        // spectra, per_thread, bits)` (taps at most the kernel's: `select`); the callers checked
        // every window lies in the inputs, the offsets hold 2 x spectra entries and fir_out
        // 2 x spectra x n values.
        unsafe { launch.launch(cfg) }.during("launching the PFB FIR")?;
        Ok(())
    }

    /// The cuFFT C2C launch.
    pub(super) fn fft(&mut self, stream: &Stream) -> Result<()> {
        let three = three_kernel(&mut self.three)?;
        three.fft.forward(stream, &mut three.fir_out, &mut three.fft_out)
    }

    /// The post-processing launch; clears the saturation counts first.
    pub(super) fn post(&mut self, c: &ChannelizerConfig, l: &mut Launch<'_>, stream: &Stream) -> Result<()> {
        let gains = &self.gains;
        let three = three_kernel(&mut self.three)?;
        let (function, kernel) = &three.post;
        let spectra = c.spectra_u32();
        l.saturated.poison_on(stream, 0)?;
        let tile = layout::POST_TILE_LOG2;
        let cfg = LaunchConfig {
            grid_dim: (layout::post_blocks(c.channels, spectra, tile), 1, 1),
            block_dim: (kernel.block_threads(c.channels), 1, 1),
            shared_mem_bytes: kernel.shared_bytes(c.bits, c.channels),
        };
        let mut launch = stream.launch_builder(function);
        launch
            .arg(three.fft_out.raw())
            .arg(gains.raw())
            .arg(l.fine.raw())
            .arg(l.rotation.raw())
            .arg(l.output.arg_mut())
            .arg(l.saturated.arg_mut())
            .arg(&c.channels)
            .arg(&spectra)
            .arg(&c.spectra_per_heap)
            .arg(&tile);
        // SAFETY: matches `pfb_post_ci*(fft, gains, fine, rotation, out, saturated, channels,
        // spectra, spectra_per_heap, tile_log2)` (the configuration's output format: `select`)
        // with the sizes allocated in `Kernels::new`.
        unsafe { launch.launch(cfg) }.during("launching the PFB post-processing")?;
        Ok(())
    }
}
