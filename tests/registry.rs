//! The kernel registries (`radio_kernels_gpu::modules::REGISTRY`) against the embedded PTX
//! modules ([`radio_kernels::MODULES`]): every registry entry is an entry point of its
//! family's module for its architecture, every entry point of a module is in that family's
//! registry, and each is emitted with the register cap and cluster shape its spec gives.
//! Runs on the CPU (it reads the PTX text), so CI checks it on every build.
use radio_kernels::gpu_shared::modules::{self, Arch, Family, KernelSpec};
use radio_kernels::MODULES;

/// A module's entry points, each with the directives between its parameter list and its body.
fn entries(ptx: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for line in ptx.lines() {
        let trimmed = line.trim();
        if let Some(name) = modules::entry_name(line) {
            open = Some((name.to_string(), Vec::new()));
        } else if trimmed == "{" {
            if let Some(entry) = open.take() {
                out.push(entry);
            }
        } else if let Some((_, directives)) = open.as_mut() {
            if trimmed.starts_with(".maxnreg") || trimmed.starts_with(".reqnctapercluster") {
                directives.push(trimmed.to_string());
            }
        }
    }
    out
}

fn expected_directives(spec: &KernelSpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = spec.max_registers {
        out.push(format!(".maxnreg {n}"));
    }
    if let Some([x, y, z]) = spec.cluster {
        out.push(format!(".reqnctapercluster {x}, {y}, {z}"));
    }
    out
}

#[test]
fn every_registry_kernel_is_built_and_every_built_kernel_is_registered() {
    let mut problems = Vec::new();
    // Every entry of every module, as (name, family, architecture), parsed once.
    let mut built = Vec::new();
    for module in MODULES {
        for (name, directives) in entries(module.ptx) {
            match modules::find(&name, module.arch) {
                None => problems.push(format!("{name} ({}) is in no registry", module.arch.name())),
                Some(spec) if spec.family != module.family => problems.push(format!(
                    "{name} is in the {:?} module but the {:?} registry",
                    module.family, spec.family
                )),
                Some(spec) if directives != expected_directives(spec) => {
                    problems.push(format!("{name}: emitted with {directives:?}, its spec says {spec:?}"))
                }
                Some(_) => {}
            }
            built.push((name, module.family, module.arch));
        }
    }
    for spec in modules::kernels() {
        if !built.iter().any(|(name, family, arch)| {
            (name.as_str(), *family, *arch) == (spec.name, spec.family, spec.arch)
        }) {
            problems.push(format!("{} ({}) is registered but not built", spec.name, spec.arch.name()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(built.len(), modules::kernels().count());
}

#[test]
fn every_family_has_a_module_per_architecture_it_registers() {
    for family in Family::ALL {
        for arch in Arch::ALL {
            let registered = modules::kernels().any(|k| k.family == family && k.arch == arch);
            let built = MODULES.iter().any(|m| m.family == family && m.arch == arch);
            assert_eq!(registered, built, "{family:?} {arch:?}");
        }
    }
}
