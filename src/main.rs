//! `radio-kernels`: the command-line front of the library.
//!
//! `radio-kernels` (no arguments) and `radio-kernels demo` observe a simulated sky through the
//! whole F-X-B chain ([`radio_kernels::demo`]) on the GPU, check every stage against its CPU
//! reference, print a table and write figures; without a GPU they say so and run the chain on
//! the CPU references at a smaller size. `radio-kernels selftest` checks every tensor-core
//! wrapper and intrinsic against the CPU. `radio-kernels bench` measures the headline
//! configuration of each kernel family ([`radio_kernels::summary`]). `radio-kernels stream`
//! runs each streaming engine from host memory for a few seconds of data and reports its
//! sustained rate against the transfer ceilings measured in the same run
//! ([`radio_kernels::stream`]).
//!
//! Arguments are checked before any work: every option is parsed in its own type and range
//! (no wrapping casts, no clamping, floats finite), the sizes derived from several of them
//! (the demo's spectra from `--seconds` and `--channels`) are computed with checked
//! arithmetic, and the demo's `--out` folder is created and written to once. A bad argument,
//! an unknown option, a missing value or an option given twice prints `error: <option>: why`
//! on stderr and exits with status 2; a failed run exits with 1.
use radio_kernels::demo::{self, Options as DemoOptions};
use radio_kernels::selftest::{check_sparse_mma, cpu_checks, gpu_checks, Check, SparseForm};
use radio_kernels::stream::{self, EngineKind, Selection};
use radio_kernels::{Error, Gpu};
use std::num::{IntErrorKind, ParseIntError};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

const USAGE: &str = "usage: radio-kernels [demo] [--dishes N] [--channels N] [--seconds S] [--sources N]
                     [--out DIR] [--cpu] [--device N] [--seed N]
       radio-kernels selftest [--device N] [--ptx] [--cases N] [--seed N]
       radio-kernels bench [--device N] [--ptx]
       radio-kernels stream [--engine E] [--seconds S] [--depth N] [--device N]
                     [--stations N] [--channels N] [--bits B] [--sample-rate GHZ]

  demo         (the default) simulate a CHORD-pathfinder observation and run it through the
               PFB, correlator, baseband, FRB and delay beamformers on the GPU, checking each
               stage against its CPU reference; without a GPU, run the CPU references
  --dishes N   64 (8 x 8, default) or 256 (16 x 16) dual-polarisation dishes
  --channels N PFB channels, a power of two in 64..=8192 (default 1024; on the CPU 128)
  --seconds S  seconds of sky, more than 0 and at most 16384 spectra of 2 x channels samples
               at 3.2 GHz (default 512 spectra: 0.33 ms; on the CPU 128 spectra)
  --sources N  point sources, 1..=8 (default 3)
  --out DIR    where the figures go (default demo-out); created and checked before the run
  --cpu        use the CPU references even if there is a GPU
  selftest     check every tensor-core wrapper and device intrinsic against the CPU
  --device N   CUDA device ordinal (default 0; given explicitly, that GPU must exist)
  --ptx        load every kernel module from PTX (the driver's compiler), not the cubins
  --cases N    random matrices per wrapper, 1..=4096 (default 64)
  --seed N     random seed, 0..=2^64-1 (default: time-based for selftest, 1 for the demo)
  bench        measure the headline configuration of each kernel family (BENCHMARKS.md)
               on this GPU, against the ceilings measured in the same run
  stream       run each streaming engine from pinned host memory at its headline
               configuration and report its sustained rate, real-time factor, fraction of
               the transfer bound and of the kernel-only rate, and host CPU time, against
               the PCIe ceilings measured in the same run (and, for the PFB, Merry's model)
  --engine E   all (default: every engine), correlator, pfb, baseband, delay or frb
  --seconds S  (stream) seconds of telescope data per engine, more than 0 and at most
               3600 (default 2); at least 32 chunks run whatever S
  --depth N    slots of each ring, 1..=16 (default 3: upload, compute and download overlap)
  --stations N correlator stations, 1..=65535 (default 512; 2 pols, 16 channels, T = 8192)
  --channels N (stream) PFB channels, a power of two in 64..=32768 (default 1024, 4096
               and 32768; chunks of 2^24 samples per polarisation)
  --bits B     PFB input bits: 4, 8, 10, 12 or 16 (default 10)
  --sample-rate GHZ  PFB digitiser rate per polarisation for the real-time factor, more
               than 0 and at most 1000 (default 1.712, MeerKAT L band)

A bad argument exits with status 2 before any work.";

/// Exit status of a bad command line.
const USAGE_ERROR: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sub {
    Demo,
    Selftest,
    Bench,
    Stream,
}

impl Sub {
    fn name(self) -> &'static str {
        match self {
            Sub::Demo => "demo",
            Sub::Selftest => "selftest",
            Sub::Bench => "bench",
            Sub::Stream => "stream",
        }
    }
}

/// Every option: its name, whether it takes a value, and the subcommands that accept it.
const OPTIONS: &[(&str, bool, &[Sub])] = &[
    ("--dishes", true, &[Sub::Demo]),
    ("--channels", true, &[Sub::Demo, Sub::Stream]),
    ("--seconds", true, &[Sub::Demo, Sub::Stream]),
    ("--sources", true, &[Sub::Demo]),
    ("--out", true, &[Sub::Demo]),
    ("--cpu", false, &[Sub::Demo]),
    ("--device", true, &[Sub::Demo, Sub::Selftest, Sub::Bench, Sub::Stream]),
    ("--seed", true, &[Sub::Demo, Sub::Selftest]),
    ("--cases", true, &[Sub::Selftest]),
    ("--ptx", false, &[Sub::Selftest, Sub::Bench]),
    ("--engine", true, &[Sub::Stream]),
    ("--depth", true, &[Sub::Stream]),
    ("--stations", true, &[Sub::Stream]),
    ("--bits", true, &[Sub::Stream]),
    ("--sample-rate", true, &[Sub::Stream]),
];

/// The command line split into a subcommand and its options, each given at most once, with
/// its value (empty for a flag). Nothing is interpreted yet.
struct Given {
    sub: Sub,
    options: Vec<(&'static str, String)>,
}

impl Given {
    fn get(&self, name: &str) -> Option<&str> {
        self.options.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
    fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
    /// The value of an integer option, if given: parsed in `T` and accepted by `ok`; `range`
    /// describes the accepted values for the message.
    fn whole<T>(&self, name: &str, range: &str, ok: impl Fn(T) -> bool) -> Result<Option<T>, String>
    where
        T: FromStr<Err = ParseIntError> + Copy,
    {
        self.get(name).map(|text| whole(name, text, range, ok)).transpose()
    }
}

/// Parses `text`, the value of option `name`, as a `T` that `ok` accepts.
fn whole<T>(name: &str, text: &str, range: &str, ok: impl Fn(T) -> bool) -> Result<T, String>
where
    T: FromStr<Err = ParseIntError> + Copy,
{
    let out_of_range = || format!("{name}: {text} is out of range ({range})");
    match text.parse::<T>() {
        Ok(value) if ok(value) => Ok(value),
        Ok(_) => Err(out_of_range()),
        Err(e) => {
            let negative = text
                .strip_prefix('-')
                .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
            match e.kind() {
                IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => Err(out_of_range()),
                _ if negative => Err(out_of_range()),
                _ => Err(format!("{name}: `{text}` is not a whole number ({range})")),
            }
        }
    }
}

/// Parses `text`, the value of option `name`, as a finite `f64` above 0.
fn positive_seconds(name: &str, text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|_| format!("{name}: `{text}` is not a number"))?;
    if !value.is_finite() {
        return Err(format!("{name}: {text} is not a finite number"));
    }
    if value <= 0.0 {
        return Err(format!("{name}: {text} is out of range (more than 0 seconds)"));
    }
    Ok(value)
}

/// Splits the command line into a subcommand and its options. `Ok(None)`: help was asked
/// for.
fn scan(args: &[String]) -> Result<Option<Given>, String> {
    let (sub, rest) = match args.first().map(String::as_str) {
        Some("demo") => (Sub::Demo, &args[1..]),
        Some("selftest") => (Sub::Selftest, &args[1..]),
        Some("bench") => (Sub::Bench, &args[1..]),
        Some("stream") => (Sub::Stream, &args[1..]),
        Some("help") => return Ok(None),
        _ => (Sub::Demo, args),
    };
    let mut given = Given { sub, options: Vec::new() };
    let is_option = |s: &str| s == "--help" || s == "-h" || OPTIONS.iter().any(|(n, _, _)| *n == s);
    let mut rest = rest.iter().peekable();
    while let Some(arg) = rest.next() {
        if arg == "--help" || arg == "-h" {
            return Ok(None);
        }
        let Some(&(name, takes_value, subs)) = OPTIONS.iter().find(|(n, _, _)| *n == arg) else {
            return Err(if arg.starts_with('-') {
                format!("{arg}: unknown option")
            } else {
                format!("{arg}: unexpected argument (subcommands: demo, selftest, bench, stream)")
            });
        };
        if !subs.contains(&sub) {
            return Err(format!("{name}: not an option of `{}`", sub.name()));
        }
        if given.has(name) {
            return Err(format!("{name}: given twice"));
        }
        // A value is the next argument unless that is itself an option.
        let value = if takes_value {
            match rest.next_if(|v| !is_option(v)) {
                Some(v) if v.is_empty() => return Err(format!("{name}: the value is empty")),
                Some(v) => v.clone(),
                None => return Err(format!("{name}: missing value")),
            }
        } else {
            String::new()
        };
        given.options.push((name, value));
    }
    Ok(Some(given))
}

/// The demo's options as given; the others take the GPU's or the CPU's defaults.
struct DemoArgs {
    dishes: Option<u32>,
    channels: Option<u32>,
    sources: Option<u32>,
    seconds: Option<f64>,
    out: Option<PathBuf>,
    seed: Option<u64>,
}

impl DemoArgs {
    /// The options given, on `base` for the rest, with the heaps `--seconds` needs computed
    /// and every size checked ([`DemoOptions::set_seconds`], [`DemoOptions::validate`]).
    fn options(&self, base: DemoOptions) -> Result<DemoOptions, String> {
        let mut options = DemoOptions {
            dishes: self.dishes.unwrap_or(base.dishes),
            channels: self.channels.unwrap_or(base.channels),
            sources: self.sources.unwrap_or(base.sources),
            out: self.out.clone().unwrap_or(base.out),
            seed: self.seed.unwrap_or(base.seed),
            ..base
        };
        if let Some(s) = self.seconds {
            options.set_seconds(s).map_err(|e| message(&e))?;
        }
        options.validate().map_err(|e| message(&e))?;
        Ok(options)
    }
}

enum Command {
    /// `options`: checked, on the CPU's defaults if `cpu`, else on the GPU's.
    Demo {
        args: DemoArgs,
        options: DemoOptions,
        cpu: bool,
    },
    Selftest {
        cases: usize,
        seed: Option<u64>,
    },
    Bench,
    /// Checked ([`stream::Options::validate`]).
    Stream(stream::Options),
}

struct Cli {
    command: Command,
    /// The `--device` given, if any (device 0 otherwise).
    device: Option<usize>,
    /// `--ptx`: load the kernel modules from PTX only.
    ptx: bool,
}

/// Interprets the command line: every option in its type and range, every derived size
/// checked. `Ok(None)`: help was asked for.
fn parse(args: &[String]) -> Result<Option<Cli>, String> {
    let Some(given) = scan(args)? else {
        return Ok(None);
    };
    let device = given.whole::<usize>("--device", "a CUDA device ordinal, 0 or more", |_| true)?;
    let seed = given.whole::<u64>("--seed", "0..=18446744073709551615", |_| true)?;
    let command = match given.sub {
        Sub::Bench => Command::Bench,
        Sub::Stream => Command::Stream(stream_options(&given)?),
        Sub::Selftest => {
            let cases = given.whole::<usize>("--cases", "1..=4096", |c| (1..=4096).contains(&c))?;
            Command::Selftest { cases: cases.unwrap_or(64), seed }
        }
        Sub::Demo => {
            let args = DemoArgs {
                dishes: given.whole::<u32>("--dishes", "64 or 256", |d| d == 64 || d == 256)?,
                channels: given.whole::<u32>("--channels", "a power of two in 64..=8192", |c| {
                    c.is_power_of_two() && (64..=8192).contains(&c)
                })?,
                sources: given.whole::<u32>("--sources", "1..=8", |s| (1..=8).contains(&s))?,
                seconds: given.get("--seconds").map(|s| positive_seconds("--seconds", s)).transpose()?,
                out: given.get("--out").map(PathBuf::from),
                seed,
            };
            let cpu = given.has("--cpu");
            if cpu && given.has("--device") {
                return Err("--device: cannot be combined with --cpu (which runs on the CPU)".into());
            }
            // A run that finds no GPU checks the options again on the CPU's defaults.
            let base = if cpu { DemoOptions::cpu_default() } else { DemoOptions::gpu_default() };
            let options = args.options(base)?;
            Command::Demo { args, options, cpu }
        }
    };
    Ok(Some(Cli { command, device, ptx: given.has("--ptx") }))
}

/// The finite number of option `name` in `text`, more than 0 and at most `max`; `what`
/// describes the accepted values for the message.
fn positive_at_most(name: &str, text: &str, max: f64, what: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|_| format!("{name}: `{text}` is not a number ({what})"))?;
    if !value.is_finite() {
        return Err(format!("{name}: {text} is not a finite number ({what})"));
    }
    if value <= 0.0 || value > max {
        return Err(format!("{name}: {text} is out of range ({what})"));
    }
    Ok(value)
}

/// The options of `radio-kernels stream`: each in its type and range, the engine-shape
/// options only with an engine that takes them, and every shape they give checked
/// ([`stream::Options::validate`]).
fn stream_options(given: &Given) -> Result<stream::Options, String> {
    let engines = "all, correlator, pfb, baseband, delay or frb";
    let selection = match given.get("--engine") {
        None | Some("all") => Selection::All,
        Some(name) => match EngineKind::from_name(name) {
            Some(kind) => Selection::One(kind),
            None => return Err(format!("--engine: `{name}` is not an engine ({engines})")),
        },
    };
    let seconds = given
        .get("--seconds")
        .map(|s| {
            positive_at_most(
                "--seconds",
                s,
                stream::MAX_SECONDS,
                "more than 0 and at most 3600 seconds of data",
            )
        })
        .transpose()?;
    let depth = given.whole::<usize>("--depth", "1..=16", |d| (1..=stream::MAX_DEPTH).contains(&d))?;
    let stations = given.whole::<u32>("--stations", "1..=65535", |n| (1..=65535).contains(&n))?;
    let channels = given.whole::<u32>("--channels", "a power of two in 64..=32768", |n| {
        n.is_power_of_two() && (64..=32768).contains(&n)
    })?;
    let bits = given.whole::<u32>("--bits", "4, 8, 10, 12 or 16", |b| [4, 8, 10, 12, 16].contains(&b))?;
    let sample_rate_hz = given
        .get("--sample-rate")
        .map(|s| positive_at_most("--sample-rate", s, 1000.0, "GHz, more than 0 and at most 1000"))
        .transpose()?
        .map(|ghz| ghz * 1e9);
    // A shape option must reach an engine that runs.
    for (name, kind) in [
        ("--stations", EngineKind::Correlator),
        ("--channels", EngineKind::Pfb),
        ("--bits", EngineKind::Pfb),
        ("--sample-rate", EngineKind::Pfb),
    ] {
        if given.has(name) && !selection.includes(kind) {
            return Err(format!(
                "{name}: applies to the {} engine, which is not selected by --engine",
                kind.name()
            ));
        }
    }
    let defaults = stream::Options::default();
    let options = stream::Options {
        selection,
        run: stream::RunOptions { seconds: seconds.unwrap_or(defaults.run.seconds), ..defaults.run },
        depth: depth.unwrap_or(defaults.depth),
        stations,
        channels,
        bits,
        sample_rate_hz,
    };
    // Every range is checked above; this checks the shapes they give (e.g. a correlator
    // input this host cannot address), naming the option.
    if let Err(e) = stream::correlator_config(options.correlator_stations()) {
        return Err(format!("--stations: {}", message(&e)));
    }
    for n in options.pfb_channels() {
        if let Err(e) = stream::pfb_config(n, options.pfb_bits()) {
            return Err(format!("--channels: {}", message(&e)));
        }
    }
    options.validate().map_err(|e| format!("stream: {}", message(&e)))?;
    Ok(options)
}

/// An error's text without the "invalid configuration: " of the library's messages, which
/// name the option themselves.
fn message(e: &Error) -> String {
    match e {
        Error::InvalidConfig(m) => m.clone(),
        e => e.to_string(),
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}\n(radio-kernels --help shows the usage)");
    ExitCode::from(USAGE_ERROR)
}

fn main() -> ExitCode {
    // `std::env::args` would panic on an argument that is not UTF-8.
    let args: Result<Vec<String>, _> = std::env::args_os().skip(1).map(|a| a.into_string()).collect();
    let args = match args {
        Ok(args) => args,
        Err(arg) => return usage_error(&format!("{}: not valid UTF-8", arg.to_string_lossy())),
    };
    let cli = match parse(&args) {
        Ok(Some(cli)) => cli,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => return usage_error(&message),
    };
    match cli.command {
        Command::Demo { args, options, cpu } => run_demo(&args, options, cpu, cli.device),
        Command::Bench => bench(cli.device, cli.ptx),
        Command::Stream(options) => run_stream(&options, cli.device),
        Command::Selftest { cases, seed } => {
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(1)
            });
            selftest(cli.device, cli.ptx, cases, seed)
        }
    }
}

/// Opens `--device` (or device 0). `Err`: the exit for a `--device` given explicitly that
/// cannot be opened (the user asked for that GPU; falling back would run something else).
fn open_gpu(device: Option<usize>, ptx: bool) -> Result<std::result::Result<Gpu, Error>, ExitCode> {
    let open = if ptx { radio_kernels::open_ptx } else { radio_kernels::open };
    match (open(device.unwrap_or(0)), device) {
        (Err(e @ (Error::NoDriver | Error::NoDevice { .. })), Some(d)) => {
            Err(usage_error(&format!("--device: {d}: {e}")))
        }
        (result, _) => Ok(result),
    }
}

fn run_demo(args: &DemoArgs, mut demo_options: DemoOptions, cpu: bool, device: Option<usize>) -> ExitCode {
    let gpu = if cpu {
        None
    } else {
        match open_gpu(device, false) {
            Err(exit) => return exit,
            Ok(Ok(gpu)) => Some(gpu),
            Ok(Err(e)) => {
                println!(
                    "No usable GPU ({e}): running the chain on the CPU references (CPU defaults for the \
                     sizes not given)."
                );
                match args.options(DemoOptions::cpu_default()) {
                    Ok(options) => demo_options = options,
                    Err(message) => return usage_error(&message),
                }
                None
            }
        }
    };
    if let Err(why) = demo::check_out(&demo_options.out) {
        return usage_error(&format!("--out: {}: {why}", demo_options.out.display()));
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

fn selftest(device: Option<usize>, ptx: bool, cases: usize, seed: u64) -> ExitCode {
    let started = std::time::Instant::now();
    let opened = match open_gpu(device, ptx) {
        Err(exit) => return exit,
        Ok(opened) => opened,
    };
    let open_s = started.elapsed().as_secs_f64();
    println!("radio-kernels {} self-check (seed {seed})", env!("CARGO_PKG_VERSION"));
    let mut ok = true;
    match opened {
        Ok(gpu) => {
            let (major, minor) = gpu.compute_capability();
            println!("GPU {}: {} (sm_{major}{minor}, {} SMs)", gpu.ordinal(), gpu.name(), gpu.sm_count());
            // Each family's module is loaded on its first use; here all of them, timed (the
            // cubin assembled for this device, else the driver's JIT compilation of the PTX or its
            // cache: CUDA_CACHE_DISABLE=1 for cold).
            println!("  open: {:.3} s (no module loaded)", open_s);
            match gpu.load_modules() {
                Ok(loads) => {
                    for (family, arch, how, time) in loads {
                        let how = match how {
                            radio_kernels::Loaded::Cubin => "cubin",
                            radio_kernels::Loaded::Ptx => "PTX",
                        };
                        println!(
                            "  load {:<20} {:<7} {:<5} {:.3} s",
                            family.name(),
                            arch.name(),
                            how,
                            time.as_secs_f64()
                        );
                    }
                }
                Err(e) => {
                    println!("  FAIL loading the kernel modules: {e}");
                    ok = false;
                }
            }
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

fn bench(device: Option<usize>, ptx: bool) -> ExitCode {
    let gpu = match open_gpu(device, ptx) {
        Err(exit) => return exit,
        Ok(Ok(gpu)) => gpu,
        Ok(Err(e)) => {
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

fn run_stream(options: &stream::Options, device: Option<usize>) -> ExitCode {
    let gpu = match open_gpu(device, false) {
        Err(exit) => return exit,
        Ok(Ok(gpu)) => gpu,
        Ok(Err(e)) => {
            eprintln!("radio-kernels stream needs a GPU: {e}");
            return ExitCode::FAILURE;
        }
    };
    match stream::run(&gpu, options) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("radio-kernels stream stopped: {e}");
            ExitCode::FAILURE
        }
    }
}
