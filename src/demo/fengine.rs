//! The demo's digitisers and F-engine: the simulated sky sampled by 10-bit digitisers
//! ([`simulate`]), then the PFB channelizer on every dish ([`channelize`]) to complex int8
//! channels `x[d][c][t][p]`, which every later stage reads ([`Channelized::value`]).
use super::chain::{cpu_stage, real_time, sustained_ms, Chain};
use super::sky::{self, SAMPLE_RATE};
use super::{Stage, DEPTH, TAPS};
use radio_kernels_host::pfb::{self, Channelizer, ChannelizerConfig, DelayModel, OutputFormat};
use radio_kernels_host::{Error, Gpu, Result};
use std::time::Instant;

/// The digitised observation: per dish, each polarisation's samples, and the same packed as
/// the channelizer's 10-bit input.
pub(super) struct Sky {
    pub voltages: Vec<[Vec<i32>; 2]>,
    pub packed: Vec<[Vec<u8>; 2]>,
    /// Samples per polarisation: `(T + taps) x 2N`.
    pub chunk_samples: u32,
}

/// Simulates the sky and digitises it: `(T + taps) x 2N` 10-bit samples per polarisation
/// of every dish, on the CPU.
pub(super) fn simulate(chain: &Chain) -> Result<(Sky, Stage)> {
    let (t_n, n, d_n) = (chain.t_n, chain.n, chain.d_n);
    // Samples per polarisation: (T + taps) x 2N, at most 16400 x 16384 after `validate`.
    let chunk_samples =
        t_n.checked_add(TAPS).and_then(|t| t.checked_mul(n)).and_then(|t| t.checked_mul(2)).ok_or_else(
            || Error::InvalidConfig(format!("({t_n} + {TAPS}) x 2 x {n} samples overflow u32")),
        )?;
    let samples = chunk_samples as usize;
    let started = Instant::now();
    let voltages = sky::observe(chain.array, &chain.sources, samples, chain.options.seed)?;
    let packed: Vec<[Vec<u8>; 2]> = voltages
        .iter()
        .map(|v| [0, 1].map(|p| pfb::pack_samples(&v[p], 10).expect("10-bit samples")))
        .collect();
    let stage = Stage {
        name: "sky (CPU)",
        shape: format!("{d_n} dishes x 2 pols x {samples} samples, 10-bit"),
        ms: None,
        throughput: format!("{:.1} s on the CPU", started.elapsed().as_secs_f64()),
        check: Ok("-".into()),
    };
    Ok((Sky { voltages, packed, chunk_samples }, stage))
}

/// The F-engine's output: one int8 chunk per dish, in the channelizer's layout.
pub(super) struct Channelized {
    pub config: ChannelizerConfig,
    pub data: Vec<Vec<u8>>,
}

impl Channelized {
    /// `x[d][c][t][p]` as (re, im).
    pub fn value(&self, d: u32, c: u32, t: u32, p: u32) -> (i32, i32) {
        let s_heap = self.config.spectra_per_heap;
        let i = self.config.output_index(t / s_heap, c, t % s_heap, p);
        pfb::output_value(&self.data[d as usize], OutputFormat::Ci8, i)
    }
}

/// The channelizer's inputs besides the samples: its configuration, gains, flags and
/// prototype filter.
struct Setup {
    config: ChannelizerConfig,
    gains: Vec<radio_kernels_host::Complex<f32>>,
    present: Vec<bool>,
    weights: Vec<f32>,
}

impl Setup {
    /// The f64 reference of dish `d`'s output chunk.
    fn reference(&self, sky: &Sky, d: usize) -> Result<Vec<u8>> {
        pfb::reference_chunk(
            &self.config,
            &self.weights,
            &self.gains,
            &[DelayModel::default(); 2],
            [&sky.voltages[d][0], &sky.voltages[d][1]],
            [&self.present, &self.present],
            0,
        )
        .map(|r| r.output)
    }
}

/// The PFB channelizer on every dish: 16 taps, 10-bit input, complex int8 output. On the
/// GPU, each dish is a stream of its own through the streaming engine, timed in its steady
/// state and checked on the first and last dishes against the f64 reference.
pub(super) fn channelize(chain: &Chain, sky: &Sky) -> Result<(Channelized, Stage)> {
    let (n, t_n, d_n) = (chain.n, chain.t_n, chain.d_n);
    let samples = sky.chunk_samples as usize;
    let setup = Setup {
        config: ChannelizerConfig {
            channels: n,
            taps: TAPS,
            bits: 10,
            spectra_per_heap: chain.options.spectra_per_heap,
            heaps_per_chunk: chain.options.heaps,
            chunk_samples: sky.chunk_samples,
            packet_samples: 2 * n,
            max_delay: 0,
            output: OutputFormat::Ci8,
        },
        // Channel rms equals the input rms (unit-norm weights); 0.5 puts it near 20 in int8.
        gains: vec![radio_kernels_host::Complex::new(0.5f32, 0.0); 2 * n as usize],
        present: vec![true; samples / (2 * n) as usize],
        weights: pfb::hann_sinc_weights(n, TAPS),
    };
    let shape = format!("{d_n} x 2 x {samples} 10-bit -> {n} ch x {t_n} spectra int8");
    let (data, stage) = match chain.gpu {
        Some(gpu) => channelize_gpu(chain, gpu, &setup, sky, shape)?,
        None => {
            let out: Vec<Vec<u8>> =
                (0..d_n as usize).map(|d| setup.reference(sky, d)).collect::<Result<_>>()?;
            (out, cpu_stage("PFB channelizer", shape))
        }
    };
    Ok((Channelized { config: setup.config, data }, stage))
}

fn channelize_gpu(
    chain: &Chain,
    gpu: &Gpu,
    setup: &Setup,
    sky: &Sky,
    shape: String,
) -> Result<(Vec<Vec<u8>>, Stage)> {
    let d_n = chain.d_n;
    let samples = sky.chunk_samples as usize;
    let mut channelizer = Channelizer::new(gpu, setup.config.clone(), None)?;
    channelizer.set_gains(&setup.gains)?;
    let mut engine = channelizer.streaming(DEPTH)?;
    // Each dish is a stream of its own: one chunk, one output chunk.
    let submit = |engine: &mut pfb::ChannelizerStream, p: &[Vec<u8>; 2]| -> Result<()> {
        let input = engine.input()?;
        for ((samples, present), packed) in input.samples.into_iter().zip(input.present).zip(p) {
            samples.copy_from_slice(packed);
            present.fill(true);
        }
        engine.submit()
    };
    let mut out = Vec::new();
    for p in &sky.packed {
        engine.reset()?;
        submit(&mut engine, p)?;
        let chunk = engine.output()?.ok_or_else(|| Error::InvalidConfig("PFB gave no chunk".into()))?;
        out.push(chunk.data.to_vec());
        if engine.pending() != 0 {
            return Err(Error::InvalidConfig("PFB gave more than one chunk".into()));
        }
    }
    // The steady state: dish 0's chunk in every slot, one continuing stream.
    engine.reset()?;
    for _ in 0..DEPTH {
        submit(&mut engine, &sky.packed[0])?;
        while engine.output()?.is_some() {}
    }
    let ms = sustained_ms(&mut engine)?;
    let mut worst = 0;
    for d in [0, d_n as usize - 1] {
        let r = setup.reference(sky, d)?;
        for i in 0..setup.config.output_values() {
            let (a, b) = (
                pfb::output_value(&out[d], OutputFormat::Ci8, i),
                pfb::output_value(&r, OutputFormat::Ci8, i),
            );
            worst = worst.max((a.0 - b.0).abs()).max((a.1 - b.1).abs());
        }
    }
    // One dish's chunk per `ms`; the array needs all `d_n` dishes in real time.
    let rate = samples as f64 / (ms * 1e-3) / 1e9;
    let chunk_seconds = samples as f64 / SAMPLE_RATE;
    let stage = Stage {
        name: "PFB channelizer",
        shape,
        ms: Some(ms),
        throughput: real_time(
            format!("{rate:.1} Gsample/s/pol per dish"),
            d_n as f64 * ms * 1e-3 / chunk_seconds,
        ),
        check: if worst <= 1 {
            Ok(format!("2 dishes within {worst} LSB of f64"))
        } else {
            Err(format!("off by {worst} LSB"))
        },
    };
    Ok((out, stage))
}
