//! Compiles `kernels-gpu` to PTX, splits it into one module per kernel family and
//! architecture, emits each kernel as its registry spec says, assembles cubins where it finds
//! the tested `ptxas`, and embeds them (the part cuda_builder plays in Rust-CUDA).
//!
//! The nested build uses rustc's own `nvptx64-nvidia-cuda` backend with `-Zbuild-std=core`
//! (RUSTC_BOOTSTRAP=1 scoped to that build only), target-cpu sm_80 and PTX ISA 8.5 (needed by
//! `mma.sp::ordered_metadata`), in a target directory of its own so it never waits on the
//! lock of the build that runs this script. A second build, for sm_90a with
//! `--cfg radio_sm90a`, holds only Hopper's `wgmma` kernels.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use radio_kernels_gpu::modules::{self, Arch, Family, KernelSpec};

const TARGET: &str = "nvptx64-nvidia-cuda";
const TARGET_CPU: &str = "sm_80";
const PTX_ISA: &str = "+ptx85";

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let device_crate = root.join("kernels-gpu");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=rust-toolchain.toml");
    println!("cargo:rerun-if-changed=Cargo.lock");
    watch_tree(&device_crate);
    println!("cargo:rerun-if-env-changed=RADIO_KERNELS_PTX");
    println!("cargo:rerun-if-env-changed=RADIO_KERNELS_PTX_SM90A");
    println!("cargo:rerun-if-env-changed=RADIO_KERNELS_DEVICE_DEBUG");

    // <target-dir>/<profile>/build/<pkg>-<hash>/out -> <target-dir>/nvptx-build
    let target_root = out_dir.ancestors().nth(4).map(Path::to_path_buf).unwrap_or_else(|| out_dir.clone());

    // A packaged crate (crates.io) has no `kernels-gpu/` to build: it embeds the modules a
    // source build wrote to `prebuilt/` (tests/prebuilt.rs keeps them equal to the source).
    if env::var_os("RADIO_KERNELS_PTX").is_none() && !device_crate.join("Cargo.toml").exists() {
        write_prebuilt_table(&root.join("prebuilt"), &out_dir);
        return;
    }

    // The nested builds' PTX given by the caller replaces the nested builds; both must be
    // given.
    let (sm80, sm90a) = if let Ok(prebuilt) = env::var("RADIO_KERNELS_PTX") {
        let hopper = env::var("RADIO_KERNELS_PTX_SM90A").unwrap_or_else(|_| {
            fail("RADIO_KERNELS_PTX needs RADIO_KERNELS_PTX_SM90A (the sm_90a module) too")
        });
        let read = |from: &str| {
            fs::read_to_string(from).unwrap_or_else(|e| fail(&format!("cannot read {from}: {e}")))
        };
        (read(&prebuilt), read(&hopper))
    } else {
        let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        check_toolchain(&rustc);
        let sm80 = build_module(&root, &device_crate, &target_root.join("nvptx-build"), TARGET_CPU, None);
        // Hopper's wgmma kernels: a second, small build for sm_90a only (the sm_80 kernels
        // are left out of it by `cfg(radio_sm90a)`); the host loads it on compute capability
        // 9.0.
        let sm90a = build_module(
            &root,
            &device_crate,
            &target_root.join("nvptx-build-sm90a"),
            "sm_90a",
            Some("radio_sm90a"),
        );
        (sm80, sm90a)
    };
    let ptxas = find_ptxas(&root);
    let cache = target_root.join("cubin-cache");
    write_modules(
        &out_dir,
        &apply_registry(&sm80, Arch::Sm80),
        &apply_registry(&sm90a, Arch::Sm90a),
        ptxas.as_ref().map(|p| (p, cache.as_path())),
    );
}

/// Devices a module's cubins are assembled for: the sm_80 modules for the Ampere, Ada and
/// Hopper GPUs users run, the sm_90a modules for Hopper. Other devices JIT-compile the PTX.
const CUBIN_TARGETS: [(Arch, &[&str]); 2] =
    [(Arch::Sm80, &["sm_80", "sm_86", "sm_89", "sm_90"]), (Arch::Sm90a, &["sm_90a"])];

/// The ptxas release whose cubins the GPU suite has passed with (the PyPI wheel CI installs);
/// another release's cubins would be untested code, so such a build embeds PTX only.
const CUBIN_PTXAS_RELEASE: &str = "release 12.9";

/// Families that stay PTX-only: the FRB modules' cubins (ptxas 12.9, and 13.0) fail FRB GPU
/// tests on the H200 where the driver's JIT compilation of the same PTX passes them: the first
/// kernel's sm_80 cubin with out-of-bounds 2-byte stores under compute-sanitizer, the sm_90a
/// cubin with illegal-address faults in the resampling tests. Until that is understood the
/// FRB family is compiled by the driver.
const PTX_ONLY: [Family; 1] = [Family::FrbBeamformer];

/// `ptxas` [`CUBIN_PTXAS_RELEASE`], if this machine has it: `$RADIO_KERNELS_PTXAS`, then the
/// PyPI wheel CI installs under `.tools/`, then `ptxas` on `PATH`.
fn find_ptxas(root: &Path) -> Option<Ptxas> {
    println!("cargo:rerun-if-env-changed=RADIO_KERNELS_PTXAS");
    let candidates = [
        env::var_os("RADIO_KERNELS_PTXAS").map(PathBuf::from),
        Some(root.join(".tools/cuda-nvcc/nvidia/cuda_nvcc/bin/ptxas")),
        Some(PathBuf::from("ptxas")),
    ];
    let ptxas = candidates.into_iter().flatten().find_map(|path| {
        let out = Command::new(&path).arg("--version").output().ok().filter(|o| o.status.success())?;
        Some(Ptxas { path, version: out.stdout })
    })?;
    if !String::from_utf8_lossy(&ptxas.version).contains(CUBIN_PTXAS_RELEASE) {
        println!(
            "cargo:warning={} is not ptxas {CUBIN_PTXAS_RELEASE}: the modules are embedded as PTX only",
            ptxas.path.display()
        );
        return None;
    }
    Some(ptxas)
}

/// A `ptxas` and what its `--version` printed (part of the cubin cache key).
struct Ptxas {
    path: PathBuf,
    version: Vec<u8>,
}

/// Assembles `ptx` for `target` with `ptxas` into `out`, through a cache under `cache` keyed
/// by the PTX, the target and the ptxas version (the nested build rewrites the PTX on every
/// kernel change; unchanged modules are not assembled again). `false` when ptxas fails.
fn assemble(ptxas: &Ptxas, ptx: &Path, target: &str, out: &Path, cache: &Path) -> bool {
    use std::hash::{Hash, Hasher};
    let text = fs::read(ptx).unwrap();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (text, target, &ptxas.version).hash(&mut hasher);
    let cached = cache.join(format!("{:016x}.cubin", hasher.finish()));
    if !cached.exists() {
        let _ = fs::create_dir_all(cache);
        let partial = cached.with_extension(format!("partial{}", std::process::id()));
        let status = Command::new(&ptxas.path)
            .arg(format!("-arch={target}"))
            .arg(ptx)
            .arg("-o")
            .arg(&partial)
            .status();
        if !status.is_ok_and(|s| s.success()) || fs::rename(&partial, &cached).is_err() {
            return false;
        }
    }
    fs::copy(&cached, out).is_ok()
}

/// Splits each architecture's PTX into one module per kernel family, assembles each into
/// cubins where this machine has `ptxas` ([`CUBIN_TARGETS`]), and writes them with
/// `modules.rs`, the table of `ModuleSource`s the facade embeds (`radio_kernels::MODULES`).
/// Without ptxas the modules carry PTX only, which the driver compiles on first use.
fn write_modules(out_dir: &Path, sm80: &str, sm90a: &str, ptxas: Option<(&Ptxas, &Path)>) {
    let mut jobs = Vec::new();
    let mut rows = Vec::new();
    for (arch, text) in [(Arch::Sm80, sm80), (Arch::Sm90a, sm90a)] {
        for (family, ptx) in split_modules(text, arch) {
            let stem = stem(family, arch);
            fs::write(out_dir.join(format!("{stem}.ptx")), ptx).unwrap();
            let targets = CUBIN_TARGETS.iter().find(|(a, _)| *a == arch).map_or(&[][..], |(_, t)| t);
            for target in targets.iter().filter(|_| ptxas.is_some() && !PTX_ONLY.contains(&family)) {
                jobs.push((stem.clone(), target.to_string()));
            }
            rows.push((family, arch, stem));
        }
    }
    // Two ptxas processes at a time (each is single-threaded).
    let built: Vec<(String, String)> = match ptxas {
        None => Vec::new(),
        Some((ptxas, cache)) => {
            let next = std::sync::Mutex::new(jobs.into_iter());
            let done = std::sync::Mutex::new(Vec::new());
            std::thread::scope(|scope| {
                for _ in 0..2 {
                    scope.spawn(|| loop {
                        let Some((stem, target)) = next.lock().unwrap().next() else { break };
                        let ptx = out_dir.join(format!("{stem}.ptx"));
                        let cubin = out_dir.join(format!("{stem}.{target}.cubin"));
                        if assemble(ptxas, &ptx, &target, &cubin, cache) {
                            done.lock().unwrap().push((stem, target));
                        } else {
                            println!(
                                "cargo:warning=ptxas could not assemble {stem} for {target}: that module stays PTX-only"
                            );
                        }
                    });
                }
            });
            done.into_inner().unwrap()
        }
    };
    let mut table = String::from("&[\n");
    for (family, arch, stem) in rows {
        let mut cubins = String::new();
        let mut targets: Vec<&String> = built.iter().filter(|(s, _)| *s == stem).map(|(_, t)| t).collect();
        targets.sort();
        for target in targets {
            cubins.push_str(&format!(
                "Cubin {{ target: \"{target}\", image: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{stem}.{target}.cubin\")) }}, "
            ));
        }
        table.push_str(&format!(
            "    ModuleSource {{ family: Family::{family:?}, arch: Arch::{arch:?}, ptx: include_str!(concat!(env!(\"OUT_DIR\"), \"/{stem}.ptx\")), cubins: &[{cubins}] }},\n"
        ));
    }
    table.push(']');
    fs::write(out_dir.join("modules.rs"), table).unwrap();
}

/// `modules.rs` over the files of `prebuilt/` (`<family>_<arch>.ptx` and
/// `<family>_<arch>.<target>.cubin`, as [`write_modules`] names them), embedded in place. Fails
/// the build when a kernel of the registry (the `radio-kernels-gpu` this crate was packaged
/// with) is missing from its module.
fn write_prebuilt_table(dir: &Path, out_dir: &Path) {
    watch_tree(dir);
    let mut table = String::from("&[\n");
    for arch in [Arch::Sm80, Arch::Sm90a] {
        let targets = CUBIN_TARGETS.iter().find(|(a, _)| *a == arch).map_or(&[][..], |(_, t)| t);
        for family in Family::ALL {
            let stem = stem(family, arch);
            let ptx = dir.join(format!("{stem}.ptx"));
            let Ok(text) = fs::read_to_string(&ptx) else { continue };
            let entries: Vec<&str> = text.lines().filter_map(modules::entry_name).collect();
            let kernels = modules::kernels().filter(|k| k.arch == arch && k.family == family);
            for kernel in kernels {
                if !entries.contains(&kernel.name) {
                    fail(&format!(
                        "{} lacks kernel `{}`: prebuilt/ does not match the registry",
                        ptx.display(),
                        kernel.name
                    ));
                }
            }
            let mut cubins = String::new();
            for target in targets.iter().filter(|t| dir.join(format!("{stem}.{t}.cubin")).exists()) {
                cubins.push_str(&format!(
                    "Cubin {{ target: \"{target}\", image: include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/prebuilt/{stem}.{target}.cubin\")) }}, "
                ));
            }
            table.push_str(&format!(
                "    ModuleSource {{ family: Family::{family:?}, arch: Arch::{arch:?}, ptx: include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/prebuilt/{stem}.ptx\")), cubins: &[{cubins}] }},\n"
            ));
        }
    }
    if let Some(missing) =
        modules::kernels().find(|k| !dir.join(format!("{}.ptx", stem(k.family, k.arch))).exists())
    {
        fail(&format!("prebuilt/ has no module for kernel `{}` ({})", missing.name, missing.arch.name()));
    }
    table.push(']');
    fs::write(out_dir.join("modules.rs"), table).unwrap();
}

/// One PTX module per family that has kernels in `ptx`: the header, every declaration,
/// global and `.func` of `ptx` (shared by all: a few small functions and tables), and the
/// family's `.entry` functions. Fails the build for an entry no family claims.
fn split_modules(ptx: &str, arch: Arch) -> Vec<(Family, String)> {
    let mut common = String::new();
    let mut entries: Vec<(Family, String)> = Vec::new();
    let (mut current, mut depth): (Option<(Family, String)>, i64) = (None, 0);
    for line in ptx.lines() {
        if current.is_none() && depth == 0 {
            if let Some(name) = modules::entry_name(line) {
                let family = modules::find(name, arch)
                    .map(|k| k.family)
                    .unwrap_or_else(|| fail(&format!("kernel `{name}` ({}) is in no registry", arch.name())));
                current = Some((family, String::new()));
            }
        }
        let code = line.split("//").next().unwrap_or("");
        depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
        match &mut current {
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
                if depth == 0 && code.trim() == "}" {
                    entries.push(current.take().unwrap());
                }
            }
            None => {
                common.push_str(line);
                common.push('\n');
            }
        }
    }
    if current.is_some() || depth != 0 {
        fail("the PTX module's braces do not balance (cannot split it into families)");
    }
    let mut modules: Vec<(Family, String)> = Vec::new();
    for family in Family::ALL {
        let mine: Vec<&String> = entries.iter().filter(|(f, _)| *f == family).map(|(_, t)| t).collect();
        if mine.is_empty() {
            continue;
        }
        let mut text = common.clone();
        for entry in mine {
            text.push_str(entry);
        }
        modules.push((family, text));
    }
    modules
}

/// Runs the nested nvptx64 build of `kernels-gpu` for `target_cpu` and returns its PTX.
fn build_module(
    root: &Path,
    device_crate: &Path,
    target_dir: &Path,
    target_cpu: &str,
    cfg: Option<&str>,
) -> String {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(root)
        .args(["rustc", "--lib", "--release", "--crate-type", "cdylib"])
        .args(["--target", TARGET, "-Zbuild-std=core"])
        .arg("--manifest-path")
        .arg(device_crate.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .args(["--config", "profile.release.panic=\"abort\""])
        .args(["--config", "profile.release.opt-level=3"])
        .args(["--config", "profile.release.codegen-units=1"])
        .args(["--config", "profile.release.debug=false"])
        .env("RUSTC_BOOTSTRAP", "1")
        // Flags for every crate of the nested build, core included.
        .env("CARGO_ENCODED_RUSTFLAGS", device_rustflags(target_cpu, cfg));
    // What the outer build set for itself must not leak into the device build.
    for var in [
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_MAKEFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "CARGO_PROFILE_RELEASE_PANIC",
        "CARGO_PROFILE_DEV_PANIC",
        "CARGO_PROFILE_TEST_PANIC",
        "CARGO_PROFILE_BENCH_PANIC",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().unwrap_or_else(|e| fail(&format!("cannot run {cargo}: {e}")));
    if !status.success() {
        fail(&format!("the nvptx64 build of kernels-gpu for {target_cpu} failed (its errors are above)"));
    }

    let ptx = target_dir.join(TARGET).join("release").join("radio_kernels_gpu.ptx");
    let text =
        fs::read_to_string(&ptx).unwrap_or_else(|e| fail(&format!("no PTX at {}: {e}", ptx.display())));
    if !text.contains(".entry") {
        fail(&format!("the PTX module for {target_cpu} has no kernel entry points"));
    }
    text
}

/// Emits each entry of `ptx` (built for `arch`) as its registry spec says
/// (`radio_kernels_gpu::modules::REGISTRY`): `.maxnreg` for a register cap (the PTX form of
/// `__launch_bounds__`, which rustc cannot express) and `.explicitcluster` /
/// `.reqnctapercluster` for a cluster shape. Fails the build for an entry no registry lists,
/// or a registry entry of `arch` the PTX lacks.
fn apply_registry(ptx: &str, arch: Arch) -> String {
    let mut out = String::with_capacity(ptx.len() + 4096);
    let mut pending: Option<&KernelSpec> = None;
    let mut seen = Vec::new();
    for line in ptx.lines() {
        if let Some(name) = modules::entry_name(line) {
            let spec = modules::find(name, arch).unwrap_or_else(|| {
                fail(&format!(
                    "kernel `{name}` ({}) is in no registry: add it to its family's KERNELS",
                    arch.name()
                ))
            });
            seen.push(spec.name);
            pending = Some(spec);
        }
        if line.trim() == "{" {
            if let Some(spec) = pending.take() {
                if let Some(n) = spec.max_registers {
                    out.push_str(&format!(".maxnreg {n}\n"));
                }
                if let Some([x, y, z]) = spec.cluster {
                    out.push_str(&format!(".explicitcluster\n.reqnctapercluster {x}, {y}, {z}\n"));
                }
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    if let Some(missing) = modules::kernels().find(|k| k.arch == arch && !seen.contains(&k.name)) {
        fail(&format!("the registry lists `{}` ({}), which the PTX lacks", missing.name, arch.name()));
    }
    out
}

/// Target CPU and PTX ISA for every crate; RADIO_KERNELS_DEVICE_DEBUG=1 adds debug
/// assertions (e.g. `bank::debug_assert_conflict_free`) to the device code.
fn device_rustflags(target_cpu: &str, cfg: Option<&str>) -> String {
    let mut flags = vec![format!("-Ctarget-cpu={target_cpu}"), format!("-Ctarget-feature={PTX_ISA}")];
    if let Some(cfg) = cfg {
        flags.push(format!("--cfg={cfg}"));
    }
    if env::var("RADIO_KERNELS_DEVICE_DEBUG").is_ok_and(|v| v == "1") {
        flags.push("-Cdebug-assertions=on".into());
    }
    flags.join("\x1f")
}

/// Names the rustup component that is missing, instead of a deep error from the nested build.
fn check_toolchain(rustc: &str) {
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run {rustc}: {e}")));
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let host = env::var("HOST").unwrap();
    let bin = sysroot.join("lib/rustlib").join(&host).join("bin");
    let components = [
        ("rust-src", sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml")),
        ("llvm-bitcode-linker", bin.join("self-contained/llvm-bitcode-linker")),
        ("llvm-tools", bin.join("llc")),
    ];
    let missing: Vec<&str> = components
        .iter()
        .filter(|(_, path)| !path.exists() && !path.with_extension("exe").exists())
        .map(|(name, _)| *name)
        .collect();
    if !missing.is_empty() {
        // The toolchain this build runs on: rustup names it in RUSTUP_TOOLCHAIN; otherwise the
        // sysroot's folder is its name. (A downstream crate's own rust-toolchain.toml does not
        // list these components, so naming the toolchain is what makes the command work.)
        let toolchain = env::var("RUSTUP_TOOLCHAIN")
            .ok()
            .or_else(|| sysroot.file_name().map(|name| name.to_string_lossy().into_owned()));
        let toolchain = toolchain.map(|t| format!(" --toolchain {t}")).unwrap_or_default();
        fail(&format!(
            "the Rust toolchain at {} lacks the component(s) {}, needed to compile the GPU \
             kernels to PTX. Install them with: rustup component add{toolchain} {}",
            sysroot.display(),
            missing.join(", "),
            missing.join(" ")
        ));
    }
}

fn watch_tree(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                watch_tree(&path);
            } else {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}

/// A module's file stem: `<family>_<arch>` (`correlator_sm_80`).
fn stem(family: Family, arch: Arch) -> String {
    format!("{}_{}", family.name(), arch.name())
}

fn fail(message: &str) -> ! {
    eprintln!("\nerror: radio-kernels build.rs: {message}\n");
    std::process::exit(1);
}
