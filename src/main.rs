//! `radio-kernels`: the command-line front of the library.
//!
//! `radio-kernels` (no arguments) and `radio-kernels demo` observe a simulated sky through the
//! whole F-X-B chain ([`radio_kernels::demo`]) on the GPU, check every stage against its CPU
//! reference, print a table and write figures; without a GPU they say so and run the chain on
//! the CPU references at a smaller size. `radio-kernels selftest` checks every tensor-core
//! wrapper and intrinsic against the CPU. The demo's `--uvh5 FILE` writes its integrated
//! visibilities as a UVH5 file (pyuvdata's format; builds with the `uvh5` feature only, which
//! `cli` does not turn on: it builds HDF5 from source and needs cmake, so a plain `cargo run`
//! stays free of it) and `--filterbank DIR` its beams as SIGPROC filterbank files.
//! `radio-kernels bench` measures the headline configuration of each kernel family
//! ([`radio_kernels::summary`]). `radio-kernels stream`
//! runs each streaming engine from host memory for a few seconds of data and reports its
//! sustained rate against the transfer ceilings measured in the same run
//! ([`radio_kernels::stream`]).
//!
//! The command line is parsed by `clap` ([`Cli`]): `--version`, `--help` for the program and
//! for each subcommand. Arguments are checked before any work: every option is parsed in its
//! own type and range (no wrapping casts, no clamping, floats finite), the sizes derived from
//! several of them (the demo's spectra from `--seconds` and `--channels`) are computed with
//! checked arithmetic, and the demo's `--out` folder is created and written to once. A bad
//! argument, an unknown option, a missing value or an option given twice prints
//! `error: <option>: why` on stderr and exits with status 2 ([`USAGE_ERROR`]); a failed run
//! exits with 1.
//!
//! Results go to stdout; the library's warnings go through the `log` facade to stderr
//! (`env_logger`: `RUST_LOG` overrides the default `warn,radio_kernels=info`), and the long
//! stages draw progress bars on stderr where it is a terminal.
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, CommandFactory, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use radio_kernels::demo::{self, Options as DemoOptions};
use radio_kernels::selftest::{check_sparse_mma, cpu_checks, gpu_checks, Check, SparseForm};
use radio_kernels::stream::{self, EngineKind, Selection};
use radio_kernels::{Error, Gpu};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::num::{IntErrorKind, ParseIntError};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Exit status of a bad command line (clap's own usage-error status).
const USAGE_ERROR: u8 = 2;

/// The subcommands, in the order the usage lists them.
const SUBCOMMANDS: &str = "demo, selftest, bench, stream";

/// GPU kernels for radio-telescope correlators and beamformers: demo, self-test, benchmarks.
///
/// With no subcommand, runs `demo` with the options given: a simulated CHORD-pathfinder
/// observation through the PFB, correlator, baseband, FRB and delay beamformers on the GPU,
/// each stage checked against its CPU reference (without a GPU, on the CPU references).
#[derive(Parser, Debug)]
#[command(
    name = "radio-kernels",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "A bad argument exits with status 2 before any work; a failed run exits with 1.\n\
                  `radio-kernels <SUBCOMMAND> --help` describes each subcommand's options."
)]
struct Cli {
    /// The demo's options, for `radio-kernels` without a subcommand.
    #[command(flatten)]
    demo: DemoArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Simulate a CHORD-pathfinder observation through the whole F-X-B chain (the default).
    ///
    /// Simulates the sky and runs it through the PFB, correlator, baseband, FRB and delay
    /// beamformers on the GPU, checking each stage against its CPU reference, then prints a
    /// table and writes four figures. Without a GPU, runs the chain on the CPU references
    /// (with the CPU defaults for the sizes not given). Exits 1 when a check fails.
    Demo(DemoArgs),
    /// Check every tensor-core wrapper and device intrinsic against the CPU.
    ///
    /// Loads every kernel module (timed), runs the GPU checks on random matrices and the CPU
    /// checks; without a GPU, the CPU checks only. Exits 1 when a check fails.
    Selftest(SelftestArgs),
    /// Measure the headline configuration of each kernel family on this GPU.
    ///
    /// Each row is a median of CUDA-event-timed launches on random data, as a fraction of the
    /// ceiling measured in the same run (the figures of BENCHMARKS.md, quickly). Needs a GPU.
    Bench(BenchArgs),
    /// Run each streaming engine from pinned host memory and report its sustained rate.
    ///
    /// Each engine runs at its headline configuration (or the shape the options give) for a
    /// few seconds of telescope data; reported: sustained rate, real-time factor, fraction of
    /// the transfer bound and of the kernel-only rate, and host CPU time, against the PCIe
    /// ceilings measured in the same run (and, for the PFB, Merry's model). Needs a GPU.
    Stream(StreamArgs),
}

/// The demo's options as given; the others take the GPU's or the CPU's defaults.
#[derive(Args, Debug, Clone)]
struct DemoArgs {
    /// Dual-polarisation dishes: 64 (8 x 8) or 256 (16 x 16) [default: 64]
    #[arg(long, value_name = "N", value_parser = dishes, allow_negative_numbers = true)]
    dishes: Option<u32>,
    /// PFB channels, a power of two in 64..=8192 [default: 1024; on the CPU 128]
    #[arg(long, value_name = "N", value_parser = demo_channels, allow_negative_numbers = true)]
    channels: Option<u32>,
    /// Seconds of sky, more than 0 and at most 16384 spectra of 2 x channels samples at
    /// 3.2 GHz [default: 512 spectra, 0.33 ms; on the CPU 128 spectra]
    #[arg(long, value_name = "S", value_parser = demo_seconds, allow_negative_numbers = true)]
    seconds: Option<f64>,
    /// Point sources, 1..=8 [default: 3]
    #[arg(long, value_name = "N", value_parser = sources, allow_negative_numbers = true)]
    sources: Option<u32>,
    /// Where the figures go, created and checked before the run [default: demo-out]
    #[arg(long, value_name = "DIR", value_parser = folder)]
    out: Option<PathBuf>,
    /// Use the CPU references even if there is a GPU
    #[arg(long)]
    cpu: bool,
    /// CUDA device ordinal [default: 0; given, that GPU must exist]
    #[arg(long, value_name = "N", value_parser = device, allow_negative_numbers = true)]
    device: Option<usize>,
    /// Random seed of the simulated sky, 0..=2^64-1 [default: 1]
    #[arg(long, value_name = "N", value_parser = seed, allow_negative_numbers = true)]
    seed: Option<u64>,
    /// Write the correlator's integrated visibilities (every channel but DC) as a UVH5 file,
    /// pyuvdata's format. Needs a build with `--features uvh5` (off by default: it builds
    /// HDF5 from source and needs cmake); other builds refuse it
    #[arg(long, value_name = "FILE", value_parser = file)]
    uvh5: Option<PathBuf>,
    /// Write the beams as SIGPROC filterbank files, one per beam: the FRB beams' 8-bit codes
    /// in DIR/frb, the delay beams' power (f32) in DIR/delay
    #[arg(long, value_name = "DIR", value_parser = folder)]
    filterbank: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct SelftestArgs {
    /// CUDA device ordinal [default: 0; given, that GPU must exist]
    #[arg(long, value_name = "N", value_parser = device, allow_negative_numbers = true)]
    device: Option<usize>,
    /// Load every kernel module from PTX (the driver's compiler), not the cubins
    #[arg(long)]
    ptx: bool,
    /// Random matrices per wrapper, 1..=4096
    #[arg(long, value_name = "N", value_parser = cases, allow_negative_numbers = true, default_value = "64")]
    cases: usize,
    /// Random seed, 0..=2^64-1 [default: time-based]
    #[arg(long, value_name = "N", value_parser = seed, allow_negative_numbers = true)]
    seed: Option<u64>,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// CUDA device ordinal [default: 0; given, that GPU must exist]
    #[arg(long, value_name = "N", value_parser = device, allow_negative_numbers = true)]
    device: Option<usize>,
    /// Load every kernel module from PTX (the driver's compiler), not the cubins
    #[arg(long)]
    ptx: bool,
}

#[derive(Args, Debug)]
struct StreamArgs {
    /// Engines to run: all, correlator, pfb, baseband, delay or frb [default: all]
    #[arg(long, value_name = "E", value_parser = engine)]
    engine: Option<Selection>,
    /// Seconds of telescope data per engine, more than 0 and at most 3600 [default: 2];
    /// at least 32 chunks run whatever S
    #[arg(long, value_name = "S", value_parser = stream_seconds, allow_negative_numbers = true)]
    seconds: Option<f64>,
    /// Slots of each ring, 1..=16 [default: 3: upload, compute and download overlap]
    #[arg(long, value_name = "N", value_parser = depth, allow_negative_numbers = true)]
    depth: Option<usize>,
    /// CUDA device ordinal [default: 0; given, that GPU must exist]
    #[arg(long, value_name = "N", value_parser = device, allow_negative_numbers = true)]
    device: Option<usize>,
    /// Correlator stations, 1..=65535 (2 pols, 16 channels, T = 8192) [default: 512]
    #[arg(long, value_name = "N", value_parser = stations, allow_negative_numbers = true)]
    stations: Option<u32>,
    /// PFB channels, a power of two in 64..=32768, chunks of 2^24 samples per polarisation
    /// [default: 1024, 4096 and 32768]
    #[arg(long, value_name = "N", value_parser = stream_channels, allow_negative_numbers = true)]
    channels: Option<u32>,
    /// PFB input bits: 4, 8, 10, 12 or 16 [default: 10]
    #[arg(long, value_name = "B", value_parser = bits, allow_negative_numbers = true)]
    bits: Option<u32>,
    /// PFB digitiser rate per polarisation for the real-time factor, GHz, more than 0 and at
    /// most 1000 [default: 1.712, MeerKAT L band]
    #[arg(long, value_name = "GHZ", value_parser = sample_rate, allow_negative_numbers = true)]
    sample_rate: Option<f64>,
}

// The value parsers: each takes the text of one option's value and says what is wrong with
// it without naming the option (the message is `error: <option>: <why>`, see
// `usage_message`).

/// `text` as a `T` that `ok` accepts; `range` describes the accepted values.
fn whole<T>(text: &str, range: &str, ok: impl Fn(T) -> bool) -> Result<T, String>
where
    T: FromStr<Err = ParseIntError> + Copy,
{
    let out_of_range = || format!("{text} is out of range ({range})");
    if text.is_empty() {
        return Err(format!("the value is empty ({range})"));
    }
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
                _ => Err(format!("`{text}` is not a whole number ({range})")),
            }
        }
    }
}

/// `text` as a finite number, more than 0 and at most `max`; `what` describes the accepted
/// values.
fn positive_at_most(text: &str, max: f64, what: &str) -> Result<f64, String> {
    if text.is_empty() {
        return Err(format!("the value is empty ({what})"));
    }
    let value: f64 = text.parse().map_err(|_| format!("`{text}` is not a number ({what})"))?;
    if !value.is_finite() {
        return Err(format!("{text} is not a finite number ({what})"));
    }
    if value <= 0.0 || value > max {
        return Err(format!("{text} is out of range ({what})"));
    }
    Ok(value)
}

fn dishes(text: &str) -> Result<u32, String> {
    whole(text, "64 or 256", |d| d == 64 || d == 256)
}
fn demo_channels(text: &str) -> Result<u32, String> {
    whole(text, "a power of two in 64..=8192", |c: u32| c.is_power_of_two() && (64..=8192).contains(&c))
}
/// Any finite number above 0: whether the spectra it needs fit depends on `--channels`
/// ([`DemoOptions::set_seconds`]).
fn demo_seconds(text: &str) -> Result<f64, String> {
    positive_at_most(text, f64::MAX, "more than 0 seconds")
}
fn sources(text: &str) -> Result<u32, String> {
    whole(text, "1..=8", |s| (1..=8).contains(&s))
}
fn folder(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() {
        return Err("the value is empty (a folder)".into());
    }
    Ok(PathBuf::from(text))
}
fn file(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() {
        return Err("the value is empty (a file)".into());
    }
    Ok(PathBuf::from(text))
}
fn device(text: &str) -> Result<usize, String> {
    whole(text, "a CUDA device ordinal, 0 or more", |_| true)
}
fn seed(text: &str) -> Result<u64, String> {
    whole(text, "0..=18446744073709551615", |_| true)
}
fn cases(text: &str) -> Result<usize, String> {
    whole(text, "1..=4096", |c| (1..=4096).contains(&c))
}
fn engine(text: &str) -> Result<Selection, String> {
    let engines = "all, correlator, pfb, baseband, delay or frb";
    match text {
        "" => Err(format!("the value is empty ({engines})")),
        "all" => Ok(Selection::All),
        name => match EngineKind::from_name(name) {
            Some(kind) => Ok(Selection::One(kind)),
            None => Err(format!("`{name}` is not an engine ({engines})")),
        },
    }
}
fn stream_seconds(text: &str) -> Result<f64, String> {
    positive_at_most(text, stream::MAX_SECONDS, "more than 0 and at most 3600 seconds of data")
}
fn depth(text: &str) -> Result<usize, String> {
    whole(text, "1..=16", |d| (1..=stream::MAX_DEPTH).contains(&d))
}
fn stations(text: &str) -> Result<u32, String> {
    whole(text, "1..=65535", |n| (1..=65535).contains(&n))
}
fn stream_channels(text: &str) -> Result<u32, String> {
    whole(text, "a power of two in 64..=32768", |n: u32| n.is_power_of_two() && (64..=32768).contains(&n))
}
fn bits(text: &str) -> Result<u32, String> {
    whole(text, "4, 8, 10, 12 or 16", |b| [4, 8, 10, 12, 16].contains(&b))
}
fn sample_rate(text: &str) -> Result<f64, String> {
    positive_at_most(text, 1000.0, "GHz, more than 0 and at most 1000")
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
            uvh5: self.uvh5.clone().or(base.uvh5),
            filterbank: self.filterbank.clone().or(base.filterbank),
            ..base
        };
        if let Some(s) = self.seconds {
            options.set_seconds(s).map_err(|e| message(&e))?;
        }
        options.validate().map_err(|e| message(&e))?;
        Ok(options)
    }
}

impl StreamArgs {
    /// The options of `radio-kernels stream`: the engine-shape options only with an engine
    /// that takes them, and every shape they give checked ([`stream::Options::validate`]).
    fn options(&self) -> Result<stream::Options, String> {
        let selection = self.engine.unwrap_or(Selection::All);
        // A shape option must reach an engine that runs.
        for (name, given, kind) in [
            ("--stations", self.stations.is_some(), EngineKind::Correlator),
            ("--channels", self.channels.is_some(), EngineKind::Pfb),
            ("--bits", self.bits.is_some(), EngineKind::Pfb),
            ("--sample-rate", self.sample_rate.is_some(), EngineKind::Pfb),
        ] {
            if given && !selection.includes(kind) {
                return Err(format!(
                    "{name}: applies to the {} engine, which is not selected by --engine",
                    kind.name()
                ));
            }
        }
        let defaults = stream::Options::default();
        let options = stream::Options {
            selection,
            run: stream::RunOptions { seconds: self.seconds.unwrap_or(defaults.run.seconds), ..defaults.run },
            depth: self.depth.unwrap_or(defaults.depth),
            stations: self.stations,
            channels: self.channels,
            bits: self.bits,
            sample_rate_hz: self.sample_rate.map(|ghz| ghz * 1e9),
        };
        // Every range is checked by the parsers; this checks the shapes they give (e.g. a
        // correlator input this host cannot address), naming the option.
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
}

/// An error's text without the "invalid configuration: " of the library's messages, which
/// name the option themselves.
fn message(e: &Error) -> String {
    match e {
        Error::InvalidConfig(m) => m.clone(),
        e => e.to_string(),
    }
}

/// The subcommand `args` run: the first argument if it names one, else `demo`.
fn subcommand_of(args: &[String]) -> &str {
    match args.first().map(String::as_str) {
        Some(sub @ ("selftest" | "bench" | "stream" | "demo")) => sub,
        _ => "demo",
    }
}

/// A clap error as `<option>: why`, the form of every usage error of the command. `sub` is
/// the subcommand being parsed, to say when an unknown option belongs to another one.
fn usage_message(e: &clap::Error, sub: &str) -> String {
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    // "--dishes <N>" (as clap shows the argument) is "--dishes".
    let arg = context(ContextKind::InvalidArg)
        .map(|a| a.split([' ', '=']).next().unwrap_or_default().to_string())
        .unwrap_or_default();
    let hint = match (e.get(ContextKind::SuggestedArg), e.get(ContextKind::SuggestedSubcommand)) {
        (Some(ContextValue::String(s)), _) => format!(" (did you mean {s}?)"),
        (_, Some(ContextValue::String(s))) => format!(" (did you mean {s}?)"),
        (_, Some(ContextValue::Strings(v))) if !v.is_empty() => {
            format!(" (did you mean {}?)", v.join(" or "))
        }
        _ => String::new(),
    };
    match e.kind() {
        ErrorKind::ValueValidation => {
            let why =
                std::error::Error::source(e).map_or_else(|| "invalid value".to_string(), |s| s.to_string());
            format!("{arg}: {why}")
        }
        ErrorKind::InvalidValue if context(ContextKind::InvalidValue).is_none_or(|v| v.is_empty()) => {
            format!("{arg}: missing value")
        }
        ErrorKind::UnknownArgument => {
            let owners: Vec<String> = Cli::command()
                .get_subcommands()
                .filter(|c| c.get_name() != sub)
                .filter(|c| c.get_arguments().any(|a| a.get_long().is_some_and(|l| format!("--{l}") == arg)))
                .map(|c| format!("`{}`", c.get_name()))
                .collect();
            if !owners.is_empty() {
                format!("{arg}: not an option of `{sub}` (only of {})", owners.join(" and "))
            } else if arg.starts_with('-') {
                format!("{arg}: unknown option{hint}")
            } else {
                format!("{arg}: unexpected argument (subcommands: {SUBCOMMANDS}){hint}")
            }
        }
        ErrorKind::InvalidSubcommand | ErrorKind::ArgumentConflict
            if context(ContextKind::InvalidSubcommand).is_some() =>
        {
            // A word that is not a subcommand, or a word after the demo's options.
            let word = context(ContextKind::InvalidSubcommand).unwrap_or_default();
            if e.kind() == ErrorKind::InvalidSubcommand {
                format!("{word}: not a subcommand ({SUBCOMMANDS}){hint}")
            } else {
                format!("{word}: unexpected argument (a subcommand goes before the options: {SUBCOMMANDS})")
            }
        }
        ErrorKind::ArgumentConflict => {
            let prior = context(ContextKind::PriorArg)
                .map(|a| a.split([' ', '=']).next().unwrap_or_default().to_string())
                .unwrap_or_default();
            if prior == arg || prior.is_empty() {
                format!("{arg}: given twice")
            } else {
                format!("{arg}: cannot be combined with {prior}")
            }
        }
        // Anything else in clap's words, without its "error: " and its usage lines.
        _ => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            first.strip_prefix("error: ").unwrap_or(first).to_string()
        }
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}\n(radio-kernels --help shows the usage)");
    ExitCode::from(USAGE_ERROR)
}

/// A progress bar of `len` steps (a spinner if `None`) on stderr, redrawn every 100 ms, with
/// `template`; hidden where stderr is not a terminal (a pipe, a file, a test's capture).
fn progress_bar(len: Option<u64>, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// A spinner with `message` while `work` runs, cleared when it returns.
fn with_spinner<T>(message: &str, work: impl FnOnce() -> T) -> T {
    let bar = progress_bar(None, "  {spinner} {msg} ({elapsed})");
    bar.set_message(message.to_string());
    let out = work();
    bar.finish_and_clear();
    out
}

/// Logs to stderr through `env_logger`: `RUST_LOG` if set, else warnings of every crate and
/// the informative lines of this one; each line `<level>: <message>`.
fn init_logging() {
    use std::io::Write;
    let env = env_logger::Env::default().default_filter_or("warn,radio_kernels=info");
    let _ = env_logger::Builder::from_env(env)
        .format(|buf, record| {
            let level = match record.level() {
                log::Level::Error => "error",
                log::Level::Warn => "warning",
                log::Level::Info => "info",
                log::Level::Debug => "debug",
                log::Level::Trace => "trace",
            };
            writeln!(buf, "{level}: {}", record.args())
        })
        .try_init();
}

fn main() -> ExitCode {
    // Every argument must be UTF-8, an output folder included (the figures' paths are).
    let args: Result<Vec<String>, OsString> = std::env::args_os().skip(1).map(|a| a.into_string()).collect();
    let args = match args {
        Ok(args) => args,
        Err(arg) => return usage_error(&format!("{}: not valid UTF-8", arg.to_string_lossy())),
    };
    let cli =
        match Cli::try_parse_from(std::iter::once("radio-kernels".to_string()).chain(args.iter().cloned())) {
            Ok(cli) => cli,
            // `--help`, `help` and `--version` print on stdout and exit 0.
            Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
                print!("{e}");
                return ExitCode::SUCCESS;
            }
            Err(e) => return usage_error(&usage_message(&e, subcommand_of(&args))),
        };
    init_logging();
    match cli.command.unwrap_or(Command::Demo(cli.demo)) {
        Command::Demo(args) => run_demo(&args),
        Command::Bench(args) => bench(args.device, args.ptx),
        Command::Stream(args) => match args.options() {
            Ok(options) => run_stream(&options, args.device),
            Err(message) => usage_error(&message),
        },
        Command::Selftest(args) => {
            let seed = args.seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(1)
            });
            selftest(args.device, args.ptx, args.cases, seed)
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

fn run_demo(args: &DemoArgs) -> ExitCode {
    if args.cpu && args.device.is_some() {
        return usage_error("--device: cannot be combined with --cpu (which runs on the CPU)");
    }
    if args.uvh5.is_some() && !cfg!(feature = "uvh5") {
        return usage_error(demo::UVH5_MISSING);
    }
    // Checked on the CPU's defaults if `--cpu`, else on the GPU's; a run that finds no GPU
    // checks them again on the CPU's.
    let base = if args.cpu { DemoOptions::cpu_default() } else { DemoOptions::gpu_default() };
    let mut demo_options = match args.options(base) {
        Ok(options) => options,
        Err(message) => return usage_error(&message),
    };
    // The data files' paths do not depend on the sizes: checked before a GPU is opened.
    if let Err((option, why)) = demo::check_files(args.uvh5.as_deref(), args.filterbank.as_deref()) {
        return usage_error(&format!("{option}: {why}"));
    }
    let gpu = if args.cpu {
        None
    } else {
        match open_gpu(args.device, false) {
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
    let started = Instant::now();
    let bar =
        progress_bar(Some(demo::stage_count(gpu.is_some())), "  [{bar:20}] {pos}/{len} {wide_msg} {elapsed}");
    // The bar counts the stages done and names the one running.
    let progress = |stage: &str| {
        bar.suspend(|| println!("  [{:6.1} s] {stage}", started.elapsed().as_secs_f64()));
        if !bar.message().is_empty() {
            bar.inc(1);
        }
        bar.set_message(stage.to_string());
    };
    let outcome = demo::run(&demo_options, gpu.as_ref(), &progress);
    bar.finish_and_clear();
    let outcome = match outcome {
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
    let started = Instant::now();
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
            match with_spinner("loading the kernel modules", || gpu.load_modules()) {
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
            match with_spinner("checking the GPU wrappers and intrinsics", || gpu_checks(&gpu, seed, cases)) {
                Ok(checks) => ok &= print_checks(&checks),
                Err(e) => {
                    println!("  FAIL GPU self-check stopped: {e}");
                    ok = false;
                }
            }
            // The older sparse spelling is not used; show how this architecture treats it.
            let sparse = with_spinner("checking the unordered sparse mma", || {
                check_sparse_mma(&gpu, SparseForm::Unordered, cases, seed)
            });
            if let Ok(check) = sparse {
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
    ok &= print_checks(&with_spinner("running the CPU checks", || cpu_checks(seed)));
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
    let bar = progress_bar(None, "  {spinner} {pos} rows measured, {elapsed}");
    let result = radio_kernels::summary::run(&gpu, &mut |row| {
        bar.suspend(|| println!("{}", row.line()));
        bar.inc(1);
    });
    bar.finish_and_clear();
    match result {
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
    println!("radio-kernels stream on {}", stream::device_line(&gpu));
    println!(
        "  at least {} s of data and {} chunks per engine after {} warm-up chunks, {} slots per ring",
        options.run.seconds, options.run.min_chunks, options.run.warmup_chunks, options.depth
    );
    // A spinner until the ceilings are measured; each engine's timed run draws its own bar.
    let spinner = progress_bar(None, "  {spinner} {msg} ({elapsed})");
    spinner.set_message("measuring the transfer ceilings");
    let report = stream::run(&gpu, options, &mut |event| match event {
        stream::Event::Ceilings(ceilings) => {
            spinner.finish_and_clear();
            println!(
                "ceilings ({} MiB copies on separate streams, medians of {}): {}",
                stream::CEILING_BYTES >> 20,
                stream::CEILING_REPS,
                ceilings.summary()
            );
        }
        stream::Event::Engine(setup) => println!("{} {}", setup.engine, setup.configuration),
        stream::Event::Measured { measured, ceilings } => println!("  {}", measured.detail(ceilings)),
        stream::Event::Merry { model, measured } => print!("{}", stream::merry::format(model, measured)),
        _ => {}
    });
    spinner.finish_and_clear();
    match report {
        Ok(report) => {
            print!("{}", stream::table(&gpu, &report.ceilings, &report.rows));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("radio-kernels stream stopped: {e}");
            ExitCode::FAILURE
        }
    }
}
