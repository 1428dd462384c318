//! Resource check of the PTX module with NVIDIA's `ptxas` (no GPU needed).
//!
//! Assembles every module of [`radio_kernels::MODULES`]: the sm_80 ones for sm_80, sm_86 and
//! sm_90, the sm_90a ones for sm_90a, with `ptxas -v`, prints each
//! kernel's registers, shared memory, stack frame and spills, and fails if any function uses
//! local memory (a stack frame or spills), if ptxas rejects the module, or if the report does
//! not cover every `.entry` of the module, or if ptxas serialised a `wgmma` chain.
//!
//! ptxas is found through `$PTXAS`, then `.tools/cuda-nvcc/nvidia/cuda_nvcc/bin/ptxas` under
//! the repository root, then `ptxas` on `PATH`. Without one the test says so and returns.
//! Run with `cargo test --test ptxas -- --nocapture` to see the table.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// The architectures a module is checked for: sm_80 PTX is what users' Ampere GPUs (sm_80,
/// sm_86) and Hopper (sm_90) run; the wgmma modules run on sm_90a.
fn targets(arch: radio_kernels::Arch) -> &'static [&'static str] {
    match arch {
        radio_kernels::Arch::Sm80 => &["sm_80", "sm_86", "sm_90"],
        radio_kernels::Arch::Sm90a => &["sm_90a"],
    }
}
const LOCAL_PTXAS: &str = ".tools/cuda-nvcc/nvidia/cuda_nvcc/bin/ptxas";
const INSTALL_HINT: &str = "python3 -m pip install --target .tools/cuda-nvcc nvidia-cuda-nvcc-cu12==12.9.86";

/// What `ptxas -v` reports for one function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct FunctionReport {
    name: String,
    /// A kernel (`Compiling entry function`), not a `.func` called by one.
    entry: bool,
    registers: Option<u32>,
    /// Static shared memory; absent from the report when zero.
    smem_bytes: u64,
    stack_frame: Option<u64>,
    spill_stores: Option<u64>,
    spill_loads: Option<u64>,
}

impl FunctionReport {
    /// A stack frame or spills: the function touches local memory.
    fn uses_local_memory(&self) -> bool {
        self.stack_frame != Some(0) || self.spill_stores != Some(0) || self.spill_loads != Some(0)
    }
}

/// Leading number of `s` ("26 registers" -> 26).
fn leading_number(s: &str) -> Option<u64> {
    let digits: String = s.trim_start().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The `N` of the comma-separated item of `list` that ends with `label`
/// (`"0 bytes stack frame, 8 bytes spill stores"`, `"spill stores"` -> 8).
fn item_value(list: &str, label: &str) -> Option<u64> {
    list.split(',').map(str::trim).find(|item| item.ends_with(label)).and_then(leading_number)
}

/// The text between the first pair of single quotes of `s`, and what follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let start = s.find('\'')? + 1;
    let len = s[start..].find('\'')?;
    Some((&s[start..start + len], &s[start + len + 1..]))
}

/// Parses the `-v` report of one ptxas run (stdout and stderr together).
///
/// Stack/spill lines belong to the last `Function properties for` line; `Used ... registers`
/// lines to the same function, or to the last entry. Errors name entries whose report is
/// incomplete and lines that belong to no function.
fn parse_report(text: &str) -> Result<Vec<FunctionReport>, String> {
    let mut functions: Vec<FunctionReport> = Vec::new();
    let mut current_entry: Option<usize> = None;
    let mut current_props: Option<usize> = None;

    fn index_of(functions: &mut Vec<FunctionReport>, name: &str) -> usize {
        if let Some(i) = functions.iter().position(|f| f.name == name) {
            return i;
        }
        functions.push(FunctionReport { name: name.to_string(), ..FunctionReport::default() });
        functions.len() - 1
    }

    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.contains("bytes stack frame") {
            let i = current_props
                .or(current_entry)
                .ok_or_else(|| format!("stack line outside any function: {trimmed:?}"))?;
            let f = &mut functions[i];
            f.stack_frame = item_value(trimmed, "bytes stack frame");
            f.spill_stores = item_value(trimmed, "bytes spill stores");
            f.spill_loads = item_value(trimmed, "bytes spill loads");
            if f.stack_frame.is_none() || f.spill_stores.is_none() || f.spill_loads.is_none() {
                return Err(format!("cannot parse stack/spill line: {trimmed:?}"));
            }
            continue;
        }
        // "ptxas info    : MESSAGE"; advisories ("ptxas FILE, line N; info : Advisory: ...")
        // and the rest have messages that match none of the cases below.
        if !trimmed.starts_with("ptxas") {
            continue;
        }
        let Some((_, message)) = trimmed.split_once(": ") else {
            continue;
        };
        let message = message.trim();
        if let Some(rest) = message.strip_prefix("Compiling entry function") {
            let (name, _) = quoted(rest).ok_or_else(|| format!("no kernel name in {trimmed:?}"))?;
            let i = index_of(&mut functions, name);
            functions[i].entry = true;
            current_entry = Some(i);
            current_props = None;
        } else if let Some(rest) = message.strip_prefix("Function properties for") {
            let name = rest.trim().trim_matches('\'');
            if name.is_empty() {
                return Err(format!("no function name in {trimmed:?}"));
            }
            current_props = Some(index_of(&mut functions, name));
        } else if let Some(rest) = message.strip_prefix("Used") {
            if !rest.contains("registers") {
                continue;
            }
            let i = current_props
                .or(current_entry)
                .ok_or_else(|| format!("register line outside any function: {trimmed:?}"))?;
            let f = &mut functions[i];
            f.registers = item_value(rest, "registers").map(|r| r as u32);
            f.smem_bytes = item_value(rest, "bytes smem").unwrap_or(0);
            if f.registers.is_none() {
                return Err(format!("cannot parse register line: {trimmed:?}"));
            }
        }
    }

    for f in &functions {
        if f.stack_frame.is_none() {
            return Err(format!("no stack/spill line for {}", f.name));
        }
        if f.entry && f.registers.is_none() {
            return Err(format!("no register line for kernel {}", f.name));
        }
    }
    Ok(functions)
}

/// Names of the kernels (`.entry`) of a PTX module, in order.
fn ptx_entries(ptx: &str) -> Vec<String> {
    ptx.lines().filter_map(radio_kernels::gpu_shared::modules::entry_name).map(str::to_string).collect()
}

/// Problems with one architecture's report: missing or extra kernels, local memory use.
fn check(arch: &str, functions: &[FunctionReport], ptx_kernels: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    let entries: Vec<&FunctionReport> = functions.iter().filter(|f| f.entry).collect();
    if entries.is_empty() {
        problems.push(format!("{arch}: no kernel found in the ptxas report"));
    }
    if entries.len() != ptx_kernels.len() {
        let reported: Vec<&str> = entries.iter().map(|f| f.name.as_str()).collect();
        let missing: Vec<&str> =
            ptx_kernels.iter().map(String::as_str).filter(|k| !reported.contains(k)).collect();
        problems.push(format!(
            "{arch}: ptxas reported {} kernels but the PTX has {} .entry (not reported: {missing:?})",
            entries.len(),
            ptx_kernels.len()
        ));
    }
    for f in functions.iter().filter(|f| f.uses_local_memory()) {
        problems.push(format!(
            "{arch}: {} {} uses local memory: {} bytes stack frame, {} bytes spill stores, {} bytes spill loads",
            if f.entry { "kernel" } else { "function" },
            f.name,
            f.stack_frame.unwrap_or(0),
            f.spill_stores.unwrap_or(0),
            f.spill_loads.unwrap_or(0),
        ));
    }
    problems
}

/// One row per kernel; `.func`s (not inlined callees, e.g. core's panic handlers) follow,
/// name last since their mangled names are long.
fn format_table(rows: &[(&str, FunctionReport)]) -> String {
    let width = rows.iter().filter(|(_, f)| f.entry).map(|(_, f)| f.name.len()).max().unwrap_or(6).max(6);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<6} {:<width$} {:>4} {:>7} {:>6} {:>8} {:>8}",
        "arch", "kernel", "regs", "smem", "stack", "spill-st", "spill-ld"
    );
    for (arch, f) in rows.iter().filter(|(_, f)| f.entry) {
        let regs = f.registers.map_or("-".to_string(), |r| r.to_string());
        let _ = writeln!(
            out,
            "{:<6} {:<width$} {:>4} {:>7} {:>6} {:>8} {:>8}",
            arch,
            f.name,
            regs,
            f.smem_bytes,
            f.stack_frame.unwrap_or(0),
            f.spill_stores.unwrap_or(0),
            f.spill_loads.unwrap_or(0),
        );
    }
    for (arch, f) in rows.iter().filter(|(_, f)| !f.entry) {
        let _ = writeln!(
            out,
            "{arch:<6} .func: {} bytes stack, {} bytes spill stores, {} bytes spill loads: {}",
            f.stack_frame.unwrap_or(0),
            f.spill_stores.unwrap_or(0),
            f.spill_loads.unwrap_or(0),
            f.name,
        );
    }
    out
}

fn find_ptxas() -> Option<PathBuf> {
    if let Some(explicit) = env::var_os("PTXAS") {
        let path = PathBuf::from(explicit);
        assert!(
            path.is_file(),
            "PTXAS={} is not a file (unset it, or install ptxas with: {INSTALL_HINT})",
            path.display()
        );
        return Some(path);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(LOCAL_PTXAS);
    if local.is_file() {
        return Some(local);
    }
    env::var_os("PATH")
        .and_then(|paths| env::split_paths(&paths).map(|dir| dir.join("ptxas")).find(|p| p.is_file()))
}

/// Removes its file on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

fn temp_file(tag: &str, ext: &str) -> TempFile {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    TempFile(env::temp_dir().join(format!("radio-kernels-ptxas-{}-{nanos}-{tag}.{ext}", std::process::id())))
}

/// ptxas's notes that it serialised wgmmas or waited on them where the code did not ask
/// (C7510 ff.: accumulator registers touched or moved between the ops of a chain), which
/// silently cost most of the asynchronous tensor cores' speed.
fn serialized_wgmma(arch: &str, report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|l| l.contains("wgmma") && (l.contains("serialized") || l.contains("injected")))
        .chain(report.lines().filter(|l| l.contains("warpgroup.wait is injected")))
        .map(|l| format!("{arch}: {}", l.trim()))
        .collect()
}

#[test]
fn ptxas_resources_no_local_memory() {
    let Some(ptxas) = find_ptxas() else {
        println!(
            "ptxas not found ($PTXAS, {LOCAL_PTXAS}, PATH): skipping the resource check; get it with: {INSTALL_HINT}"
        );
        return;
    };
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for module in radio_kernels::MODULES {
        let ptx = module.ptx;
        let ptx_kernels = ptx_entries(ptx);
        assert!(!ptx_kernels.is_empty(), "the {} module has no .entry", module.family.name());
        for &arch in targets(module.arch) {
            let ptx_file = temp_file(arch, "ptx");
            let cubin = temp_file(arch, "cubin");
            fs::write(&ptx_file.0, ptx).expect("write the PTX to a temp file");
            let out = Command::new(&ptxas)
                .arg(format!("-arch={arch}"))
                .arg("-v")
                .arg(&ptx_file.0)
                .arg("-o")
                .arg(&cubin.0)
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "ptxas -arch={arch} failed ({}):\n{stderr}\n{stdout}", out.status);
            let report = format!("{stdout}\n{stderr}");
            let functions = parse_report(&report)
                .unwrap_or_else(|e| panic!("cannot parse the ptxas -v report for {arch}: {e}\n{report}"));
            problems.extend(check(arch, &functions, &ptx_kernels));
            problems.extend(serialized_wgmma(arch, &report));
            let mut sorted = functions;
            sorted.sort_by(|a, b| (!a.entry, &a.name).cmp(&(!b.entry, &b.name)));
            rows.extend(sorted.into_iter().map(|f| (arch, f)));
        }
    }
    println!("ptxas: {}", ptxas.display());
    print!("{}", format_table(&rows));
    assert!(problems.is_empty(), "ptxas resource check failed:\n  {}", problems.join("\n  "));
}

const SAMPLE: &str = "\
ptxas info    : 0 bytes gmem
ptxas /tmp/x.ptx, line 3199; info    : Advisory: Modifier '.sp::ordered_metadata' should be used on instruction 'mma' instead of modifier '.sp'
ptxas info    : Compiling entry function 'selftest_shuffles' for 'sm_80'
ptxas info    : Function properties for selftest_shuffles
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 28 registers, used 0 barriers, 376 bytes cmem[0]
ptxas info    : Compile time = 4.546 ms
ptxas info    : Compiling entry function 'selftest_shared' for 'sm_80'
ptxas info    : Function properties for selftest_shared
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 26 registers, used 1 barriers, 4096 bytes smem, 384 bytes cmem[0], 12 bytes cmem[2]
ptxas info    : Compile time = 3.164 ms
ptxas info    : Function properties for _RNvNtCsijM4ZkS1VEs_4core9panicking9panic_fmt
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'ceiling_mma_m16n8k16_f16_f32' for 'sm_80'
ptxas info    : Function properties for ceiling_mma_m16n8k16_f16_f32
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 368 bytes cmem[0]
ptxas info    : Compile time = 9.000 ms
";

#[test]
fn parses_sample_report() {
    let functions = parse_report(SAMPLE).unwrap();
    assert_eq!(functions.len(), 4);
    assert_eq!(
        functions[0],
        FunctionReport {
            name: "selftest_shuffles".into(),
            entry: true,
            registers: Some(28),
            smem_bytes: 0,
            stack_frame: Some(0),
            spill_stores: Some(0),
            spill_loads: Some(0),
        }
    );
    assert_eq!(functions[1].name, "selftest_shared");
    assert_eq!(functions[1].registers, Some(26));
    assert_eq!(functions[1].smem_bytes, 4096);
    assert!(!functions[2].entry, "panic_fmt is a .func, not a kernel");
    assert_eq!(functions[2].registers, None);
    let spilling = &functions[3];
    assert_eq!(spilling.name, "ceiling_mma_m16n8k16_f16_f32");
    assert_eq!(spilling.registers, Some(255));
    assert_eq!(spilling.stack_frame, Some(48));
    assert_eq!(spilling.spill_stores, Some(40));
    assert_eq!(spilling.spill_loads, Some(36));
    assert!(spilling.uses_local_memory());
    assert!(!functions[0].uses_local_memory());
}

/// Real ptxas 12.9 output for a kernel with a local array (its callee inlined).
const SAMPLE_LOCAL_ARRAY: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    192 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 192 bytes cumulative stack size
ptxas info    : Compile time = 15.428 ms
ptxas info    : Function properties for helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
";

#[test]
fn stack_frame_without_spills_is_local_memory() {
    let functions = parse_report(SAMPLE_LOCAL_ARRAY).unwrap();
    assert_eq!(functions.len(), 2);
    let k = &functions[0];
    assert!(k.entry);
    assert_eq!(k.registers, Some(10));
    assert_eq!(k.smem_bytes, 0);
    assert_eq!(k.stack_frame, Some(192));
    assert_eq!((k.spill_stores, k.spill_loads), (Some(0), Some(0)));
    assert!(!functions[1].entry);
    let problems = check("sm_90", &functions, &["k".to_string()]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("kernel k uses local memory: 192 bytes stack frame"));
}

#[test]
fn check_names_spilling_kernels() {
    let functions = parse_report(SAMPLE).unwrap();
    let kernels: Vec<String> =
        ["selftest_shuffles", "selftest_shared", "ceiling_mma_m16n8k16_f16_f32"].map(String::from).to_vec();
    let problems = check("sm_80", &functions, &kernels);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("ceiling_mma_m16n8k16_f16_f32"));
    assert!(problems[0].contains("40 bytes spill stores"));

    // Without the spilling kernel the rest passes.
    let clean: Vec<FunctionReport> = functions[..3].to_vec();
    assert!(check("sm_80", &clean, &kernels[..2]).is_empty());
    // ... but not against a module with more kernels than the report.
    assert_eq!(check("sm_80", &clean, &kernels).len(), 1);
}

#[test]
fn empty_or_foreign_report_fails() {
    let functions = parse_report("ptxas info    : 0 bytes gmem\n").unwrap();
    let problems = check("sm_90", &functions, &["k".to_string()]);
    assert!(problems.iter().any(|p| p.contains("no kernel")), "{problems:?}");

    // An entry without its register line is incomplete, not silently accepted.
    let truncated = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
                     ptxas info    : Function properties for k\n\
                     \x20   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
    assert!(parse_report(truncated).is_err());
    assert!(parse_report("    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n").is_err());
}

#[test]
fn counts_ptx_entries() {
    let ptx = "\
.version 8.5
.target sm_80
// .globl\tk1 // .entry in a comment
.func _RNvpanic(
\t.param .b64 p
)
.noreturn;
.visible .entry k1(
\t.param .u64 k1_param_0
)
{
}
.entry k2()
{
}
";
    assert_eq!(ptx_entries(ptx), ["k1", "k2"]);
}

#[test]
fn table_lists_every_row() {
    let functions = parse_report(SAMPLE).unwrap();
    let rows: Vec<(&str, FunctionReport)> = functions.into_iter().map(|f| ("sm_80", f)).collect();
    let table = format_table(&rows);
    assert_eq!(table.lines().count(), 5);
    assert!(table.contains("selftest_shared"));
    assert!(table.contains("4096"));
    assert!(table.contains(".func: 0 bytes stack"));
}
