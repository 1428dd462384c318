//! `radio-kernels`: the command-line front of the library.
//!
//! `radio-kernels` (no arguments) and `radio-kernels selftest` print the GPU and check every
//! tensor-core wrapper and intrinsic against the CPU; without a GPU they say so and run the
//! CPU self-checks.
use radio_kernels::selftest::{check_sparse_mma, cpu_checks, gpu_checks, Check, SparseForm};
use radio_kernels::Error;
use std::process::ExitCode;

const USAGE: &str = "usage: radio-kernels [selftest] [--device N] [--cases N] [--seed N]

  selftest     check every tensor-core wrapper and device intrinsic against the CPU
               (the default command); without a GPU, run the CPU self-checks
  --device N   CUDA device ordinal (default 0)
  --cases N    random matrices per wrapper (default 64)
  --seed N     random seed (default: time-based, printed)";

struct Options {
    device: usize,
    cases: usize,
    seed: u64,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        device: 0,
        cases: 64,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1),
    };
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let mut value = |name: &str| {
            rest.next()
                .ok_or(format!("{name} needs a value"))?
                .parse::<u64>()
                .map_err(|e| format!("{name}: {e}"))
        };
        match arg.as_str() {
            "selftest" => {}
            "--device" => options.device = value("--device")? as usize,
            "--cases" => options.cases = (value("--cases")? as usize).clamp(1, 4096),
            "--seed" => options.seed = value("--seed")?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(options)
}

fn print_checks(checks: &[Check]) -> bool {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for check in checks {
        let verdict = if check.passed { "OK  " } else { "FAIL" };
        println!("  {verdict} {:width$}  {}", check.name, check.detail);
    }
    checks.iter().all(|c| c.passed)
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

    println!("radio-kernels {} self-check (seed {})", env!("CARGO_PKG_VERSION"), options.seed);
    let mut ok = true;
    match radio_kernels::open(options.device) {
        Ok(gpu) => {
            let (major, minor) = gpu.compute_capability();
            println!("GPU {}: {} (sm_{major}{minor}, {} SMs)", gpu.ordinal(), gpu.name(), gpu.sm_count());
            match gpu_checks(&gpu, options.seed, options.cases) {
                Ok(checks) => ok &= print_checks(&checks),
                Err(e) => {
                    println!("  FAIL GPU self-check stopped: {e}");
                    ok = false;
                }
            }
            // The older sparse spelling is not used; show how this architecture treats it.
            if let Ok(check) = check_sparse_mma(&gpu, SparseForm::Unordered, options.cases, options.seed) {
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
    ok &= print_checks(&cpu_checks(options.seed));
    if ok {
        println!("all checks passed");
        ExitCode::SUCCESS
    } else {
        println!("some checks FAILED");
        ExitCode::FAILURE
    }
}
