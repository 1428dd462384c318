//! `cargo bench --bench streaming`: every streaming engine of this build from pinned host
//! memory at its headline configuration, the rows of `radio-kernels stream`
//! ([`radio_kernels::stream`]): sustained rate, real-time factor, fraction of the transfer
//! bound (pinned H2D, D2H and both-directions ceilings measured in the same run) and of the
//! kernel-only rate, and host CPU time per second of data; for the PFB also Merry's model.
//!
//! Criterion times each engine too: one iteration is one chunk through [`pump`] (host clock,
//! the pipeline drained at the end of each sample), so its throughput is the engine's input
//! bytes per second. `RADIO_KERNELS_STREAM_ENGINE=<name>` runs one engine (e.g.
//! `correlator`), `RADIO_KERNELS_STREAM_SECONDS=<s>` sets the seconds of data of the table's
//! runs (default 2).
mod common;

use criterion::Throughput;
use radio_kernels::stream::{self, EngineKind, Options, RunOptions, Selection};
use radio_kernels::streaming::pump;
use std::time::{Duration, Instant};

fn main() {
    let Some(gpu) = common::open_gpu("streaming bench") else {
        return;
    };
    let selection = match std::env::var("RADIO_KERNELS_STREAM_ENGINE").ok().as_deref() {
        None | Some("all") => Selection::All,
        Some(name) => match EngineKind::from_name(name) {
            Some(kind) => Selection::One(kind),
            None => {
                println!("streaming bench: `{name}` is not an engine; nothing to measure");
                return;
            }
        },
    };
    let seconds = std::env::var("RADIO_KERNELS_STREAM_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(stream::DEFAULT_SECONDS);
    let options = Options {
        selection,
        run: RunOptions { seconds, progress: false, ..RunOptions::default() },
        ..Options::default()
    };
    if let Err(e) = options.validate() {
        println!("streaming bench: {e}; nothing to measure");
        return;
    }
    let ceilings = stream::measure_ceilings(&gpu, stream::CEILING_REPS).expect("transfer ceilings");
    println!("streaming bench on {}\n  ceilings: {}", stream::device_line(&gpu), ceilings.summary());

    let mut criterion = common::criterion_with(Duration::from_millis(500), Duration::from_secs(3));
    let mut group = criterion.benchmark_group("streaming");
    let mut rows = Vec::new();
    for kind in options.selection.engines() {
        stream::drive(&gpu, kind, &options, &mut |engine, setup| {
            let label = format!("{} {}", setup.engine, setup.configuration);
            let input_bytes = setup.input_bytes as u64;
            let measured = stream::run_streamed(engine, setup, &options.run)?;
            println!("{label}\n  {}", measured.detail(&ceilings));
            rows.push(measured);
            group.throughput(Throughput::Bytes(input_bytes));
            group.bench_function(&label, |b| {
                b.iter_custom(|chunks| {
                    let start = Instant::now();
                    pump(&mut *engine, chunks, |_| {}).expect("pump");
                    start.elapsed()
                })
            });
            Ok(())
        })
        .expect("streaming engine");
        if kind == EngineKind::Pfb {
            let measured: Vec<(u32, u32, f64)> =
                rows.iter().filter_map(|m| m.setup.pfb_shape.map(|(n, bits)| (n, bits, m.rate()))).collect();
            let model = stream::merry::table(&gpu, &ceilings, &measured).expect("Merry model");
            print!("{}", stream::merry::format(&model, &measured));
        }
    }
    group.finish();
    print!("{}", stream::table(&gpu, &ceilings, &rows));
    criterion.final_summary();
}
