//! `prebuilt/` against the source: the modules a packaged crate embeds (it has no
//! `kernels-gpu/` to compile, so its build script takes them from `prebuilt/`) are the modules
//! this build compiled from source ([`radio_kernels::MODULES`]), byte for byte: every PTX module
//! and, where this build assembled cubins (it found ptxas 12.9, as CI does), every cubin.
//!
//! After a change to `kernels-gpu`, refresh the files with
//! `RADIO_KERNELS_BLESS=1 cargo test --test prebuilt` (with ptxas 12.9 installed, see
//! CONTRIBUTING.md) and commit them.
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use radio_kernels::MODULES;

/// The files `prebuilt/` should hold, by name: `<family>_<arch>.ptx` and
/// `<family>_<arch>.<target>.cubin`.
fn expected() -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for module in MODULES {
        let stem = format!("{}_{}", module.family.name(), module.arch.name());
        files.insert(format!("{stem}.ptx"), module.ptx.as_bytes().to_vec());
        for cubin in module.cubins {
            files.insert(format!("{stem}.{}.cubin", cubin.target), cubin.image.to_vec());
        }
    }
    files
}

fn prebuilt_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("prebuilt")
}

/// The module files in `prebuilt/` (its README is not one).
fn present(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(dir).expect("prebuilt/ exists") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".ptx") || name.ends_with(".cubin") {
            files.insert(name, fs::read(&path).unwrap());
        }
    }
    files
}

#[test]
fn prebuilt_modules_are_the_source_build() {
    if !Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels-gpu").exists() {
        // A packaged crate: MODULES came from prebuilt/ itself, there is no source to compare.
        return;
    }
    let built_cubins = MODULES.iter().any(|m| !m.cubins.is_empty());
    let dir = prebuilt_dir();
    let want = expected();
    if std::env::var("RADIO_KERNELS_BLESS").is_ok_and(|v| v == "1") {
        assert!(built_cubins, "this build assembled no cubins (no ptxas 12.9): blessing now would drop them");
        for name in present(&dir).keys() {
            fs::remove_file(dir.join(name)).unwrap();
        }
        for (name, bytes) in &want {
            fs::write(dir.join(name), bytes).unwrap();
        }
        return;
    }
    let have = present(&dir);
    let mut problems = Vec::new();
    for (name, bytes) in &want {
        match have.get(name) {
            None => problems.push(format!("{name}: missing from prebuilt/")),
            Some(shipped) if shipped != bytes => {
                problems.push(format!("{name}: differs from the source build"))
            }
            Some(_) => {}
        }
    }
    for name in have.keys().filter(|n| !want.contains_key(*n)) {
        // Without ptxas this build has no cubins to compare the shipped ones with.
        if built_cubins || name.ends_with(".ptx") {
            problems.push(format!("{name}: in prebuilt/ but not built from the source"));
        }
    }
    if !built_cubins {
        eprintln!("this build found no ptxas 12.9: PTX compared, cubins not");
    }
    assert!(
        problems.is_empty(),
        "prebuilt/ is stale; refresh it with `RADIO_KERNELS_BLESS=1 cargo test --test prebuilt`:\n{}",
        problems.join("\n")
    );
}
