//! `radio-kernels`: the command-line front of the library.
//!
//! `radio-kernels` (no arguments) and `radio-kernels demo` observe a simulated sky through the
//! whole F-X-B chain ([`radio_kernels::demo`]) on the GPU, check every stage against its CPU
//! reference, print a table and write figures; without a GPU they say so and run the chain on
//! the CPU references at a smaller size. `radio-kernels selftest` checks every tensor-core
//! wrapper and intrinsic against the CPU. `radio-kernels bench` measures the headline
//! configuration of each kernel family ([`radio_kernels::summary`]).
use radio_kernels::demo::{self, Options as DemoOptions};
use radio_kernels::selftest::{check_sparse_mma, cpu_checks, gpu_checks, Check, SparseForm};
use radio_kernels::Error;
use std::process::ExitCode;

const USAGE: &str = "usage: radio-kernels [demo] [--dishes N] [--channels N] [--seconds S] [--sources N]
                     [--out DIR] [--cpu] [--device N] [--seed N]
       radio-kernels selftest [--device N] [--cases N] [--seed N]
       radio-kernels bench [--device N]

  demo         (the default) simulate a CHORD-pathfinder observation and run it through the
               PFB, correlator, baseband, FRB and delay beamformers on the GPU, checking each
               stage against its CPU reference; without a GPU, run the CPU references
  --dishes N   64 (8 x 8, default) or 256 (16 x 16) dual-polarisation dishes
  --channels N PFB channels, a power of two in 64..=8192 (default 1024; CPU 128)
  --seconds S  seconds of sky (default 512 spectra: 0.33 ms; CPU 128 spectra)
  --sources N  point sources, 1..=8 (default 3)
  --out DIR    where the figures go (default demo-out)
  --cpu        use the CPU references even if there is a GPU
  selftest     check every tensor-core wrapper and device intrinsic against the CPU
  --device N   CUDA device ordinal (default 0)
  --cases N    random matrices per wrapper (default 64)
  --seed N     random seed (default: time-based for selftest, 1 for the demo)
  bench        measure the headline configuration of each kernel family (BENCHMARKS.md)
               on this GPU, against the ceilings measured in the same run";

enum Command {
    Demo { options: DemoOptions, cpu: bool, sized: bool, seconds: Option<f64> },
    Selftest { cases: usize },
    Bench,
}

struct Options {
    command: Command,
    device: usize,
    seed: Option<u64>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut command =
        Command::Demo { options: DemoOptions::gpu_default(), cpu: false, sized: false, seconds: None };
    let mut device = 0;
    let mut seed = None;
    let mut rest = args.iter().peekable();
    if let Some(first) = rest.peek() {
        match first.as_str() {
            "selftest" => {
                command = Command::Selftest { cases: 64 };
                rest.next();
            }
            "demo" => {
                rest.next();
            }
            "bench" => {
                command = Command::Bench;
                rest.next();
            }
            _ => {}
        }
    }
    while let Some(arg) = rest.next() {
        let mut value = |name: &str| rest.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, v: &str| v.parse::<u64>().map_err(|e| format!("{name}: {e}"));
        match (arg.as_str(), &mut command) {
            ("--device", _) => device = number("--device", value("--device")?)? as usize,
            ("--seed", _) => seed = Some(number("--seed", value("--seed")?)?),
            ("--cases", Command::Selftest { cases }) => {
                *cases = (number("--cases", value("--cases")?)? as usize).clamp(1, 4096)
            }
            ("--dishes", Command::Demo { options, sized, .. }) => {
                options.dishes = number("--dishes", value("--dishes")?)? as u32;
                *sized = true;
            }
            ("--channels", Command::Demo { options, sized, .. }) => {
                options.channels = number("--channels", value("--channels")?)? as u32;
                *sized = true;
            }
            ("--seconds", Command::Demo { seconds, sized, .. }) => {
                let v = value("--seconds")?;
                *seconds = Some(v.parse::<f64>().map_err(|e| format!("--seconds: {e}"))?.max(0.0));
                *sized = true;
            }
            ("--sources", Command::Demo { options, .. }) => {
                options.sources = number("--sources", value("--sources")?)? as u32
            }
            ("--out", Command::Demo { options, .. }) => options.out = value("--out")?.into(),
            ("--cpu", Command::Demo { cpu, .. }) => *cpu = true,
            (other, _) => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Options { command, device, seed })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h" || a == "help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let options = match parse(&args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("radio-kernels: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match options.command {
        Command::Demo { options: demo, cpu, sized, seconds } => {
            run_demo(demo, cpu, sized, seconds, options.device, options.seed)
        }
        Command::Bench => bench(options.device),
        Command::Selftest { cases } => {
            let seed = options.seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(1)
            });
            selftest(options.device, cases, seed)
        }
    }
}

fn run_demo(
    mut demo_options: DemoOptions,
    cpu: bool,
    sized: bool,
    seconds: Option<f64>,
    device: usize,
    seed: Option<u64>,
) -> ExitCode {
    let gpu = if cpu {
        None
    } else {
        match radio_kernels::open(device) {
            Ok(gpu) => Some(gpu),
            Err(e) => {
                println!("No usable GPU ({e}): running the chain on the CPU references at a smaller size.");
                None
            }
        }
    };
    if gpu.is_none() && !sized {
        demo_options = DemoOptions {
            sources: demo_options.sources,
            out: demo_options.out.clone(),
            ..DemoOptions::cpu_default()
        };
    }
    if let Some(s) = seconds {
        demo_options.set_seconds(s);
    }
    if let Some(s) = seed {
        demo_options.seed = s;
    }
    match &gpu {
        Some(g) => println!("radio-kernels demo on {} ({} SMs)", g.name(), g.sm_count()),
        None => println!("radio-kernels demo on the CPU references"),
    }
    let started = std::time::Instant::now();
    let progress = |stage: &str| println!("  [{:6.1} s] {stage}", started.elapsed().as_secs_f64());
    let outcome = match demo::run(&demo_options, gpu.as_ref(), &progress) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("radio-kernels demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", demo::report(&outcome));
    if outcome.checks_passed() && demo::science_ok(&outcome) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn selftest(device: usize, cases: usize, seed: u64) -> ExitCode {
    println!("radio-kernels {} self-check (seed {seed})", env!("CARGO_PKG_VERSION"));
    let mut ok = true;
    match radio_kernels::open(device) {
        Ok(gpu) => {
            let (major, minor) = gpu.compute_capability();
            println!("GPU {}: {} (sm_{major}{minor}, {} SMs)", gpu.ordinal(), gpu.name(), gpu.sm_count());
            match gpu_checks(&gpu, seed, cases) {
                Ok(checks) => ok &= print_checks(&checks),
                Err(e) => {
                    println!("  FAIL GPU self-check stopped: {e}");
                    ok = false;
                }
            }
            // The older sparse spelling is not used; show how this architecture treats it.
            if let Ok(check) = check_sparse_mma(&gpu, SparseForm::Unordered, cases, seed) {
                let verdict = if check.passed { "same semantics (eq. 163)" } else { "DIFFERENT semantics" };
                println!("  info {} (not used by the kernels): {verdict}", check.name);
            }
        }
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("No GPU: {e}. Running the CPU self-checks only.");
        }
        Err(e) => {
            println!("GPU unusable: {e}. Running the CPU self-checks only.");
            ok = false;
        }
    }
    println!("CPU:");
    ok &= print_checks(&cpu_checks(seed));
    if ok {
        println!("all checks passed");
        ExitCode::SUCCESS
    } else {
        println!("some checks FAILED");
        ExitCode::FAILURE
    }
}

fn print_checks(checks: &[Check]) -> bool {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for check in checks {
        let verdict = if check.passed { "OK  " } else { "FAIL" };
        println!("  {verdict} {:width$}  {}", check.name, check.detail);
    }
    checks.iter().all(|c| c.passed)
}

fn bench(device: usize) -> ExitCode {
    let gpu = match radio_kernels::open(device) {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("radio-kernels bench needs a GPU: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "radio-kernels bench on {} ({} SMs): medians of 5 launches, random data",
        gpu.name(),
        gpu.sm_count()
    );
    match radio_kernels::summary::run(&gpu) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            println!("radio-kernels bench stopped: {e}");
            ExitCode::FAILURE
        }
    }
}
