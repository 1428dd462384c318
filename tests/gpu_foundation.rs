//! GPU tests of the foundation: every tensor-core wrapper against the CPU product through
//! the register-assignment tables (the executable form of those tables), and the device
//! intrinsics. Each test draws fresh random inputs (the seed is printed) and poisons its
//! outputs. Run on a GPU with `cargo test -- --include-ignored` (see CONTRIBUTING.md).
mod common;

use common::*;
use radio_kernels::gpu_shared::modules::{self, tools};
use radio_kernels::selftest::{self, Check, SparseForm};
use radio_kernels::Gpu;

const CASES: usize = 256;

fn assert_passed(check: Check) {
    println!("{}: {}", check.name, check.detail);
    assert!(check.passed, "{}: {}", check.name, check.detail);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mma_m16n8k8_f16_matches_cpu() {
    assert_passed(selftest::check_f16_mma(&gpu(), selftest::M16N8K8_F16, CASES, fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mma_m16n8k16_f16_matches_cpu() {
    assert_passed(selftest::check_f16_mma(&gpu(), selftest::M16N8K16_F16, CASES, fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mma_m16n8k16_f16_f32_accumulate_matches_cpu() {
    assert_passed(selftest::check_f16_mma(&gpu(), selftest::M16N8K16_F16_F32, CASES, fresh_seed()).unwrap());
}

/// The semantics of App. C.3 of Smith, CHORD FRB beamformer design note (2022) (eq. 163) with
/// `mma.sp::ordered_metadata`, the form the wrapper uses.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sparse_mma_ordered_metadata_matches_eq_163() {
    assert_passed(
        selftest::check_sparse_mma(&gpu(), SparseForm::OrderedMetadata, CASES, fresh_seed()).unwrap(),
    );
}

/// Records what the older `mma.sp` spelling does on this GPU (printed); the wrapper does not
/// use it, so its result only documents the architecture.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sparse_mma_unordered_form_is_reported() {
    let gpu = gpu();
    let check = selftest::check_sparse_mma(&gpu, SparseForm::Unordered, CASES, fresh_seed()).unwrap();
    let (major, minor) = gpu.compute_capability();
    println!(
        "sm_{major}{minor}: {} -> {}: {}",
        check.name,
        if check.passed { "matches eq. 163" } else { "differs" },
        check.detail
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sparse_mma_universal_metadata_matches_delta_matrices() {
    assert_passed(selftest::check_sparse_universal(&gpu(), CASES, fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mma_m8n8k16_s8_is_exact() {
    assert_passed(
        selftest::check_int8_mma(&gpu(), selftest::M8N8K16_S8, false, CASES, fresh_seed()).unwrap(),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mma_m8n8k16_s8_satfinite_saturates_exactly() {
    assert_passed(selftest::check_int8_mma(&gpu(), selftest::M8N8K16_S8, true, CASES, fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mma_m16n8k32_s8_is_exact() {
    assert_passed(
        selftest::check_int8_mma(&gpu(), selftest::M16N8K32_S8, false, CASES, fresh_seed()).unwrap(),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mma_m16n8k32_s8_satfinite_saturates_exactly() {
    assert_passed(
        selftest::check_int8_mma(&gpu(), selftest::M16N8K32_S8, true, CASES, fresh_seed()).unwrap(),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn warp_shuffles_and_transpose() {
    assert_passed(selftest::check_shuffles(&gpu(), fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn prmt_and_lop3_match_host_models() {
    assert_passed(selftest::check_prmt_lop3(&gpu(), fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn shared_memory_and_16_byte_global_access() {
    assert_passed(selftest::check_shared_and_global(&gpu(), fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_bank_conflict_check_matches_model() {
    assert_passed(selftest::check_bank_conflicts(&gpu(), fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_to_f16x2_conversion_rounds_to_nearest_even() {
    assert_passed(selftest::check_f16_conversion(&gpu(), fresh_seed()).unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_properties_are_read() {
    let gpu = gpu();
    println!(
        "{} sm_{}{} {} SMs",
        gpu.name(),
        gpu.compute_capability().0,
        gpu.compute_capability().1,
        gpu.sm_count()
    );
    assert!(!gpu.name().is_empty());
    assert!(gpu.compute_capability().0 >= 8);
    assert!(gpu.sm_count() > 0);
    assert!(Gpu::device_count().unwrap() >= 1);
}

/// Runs everywhere: without libcuda, `open` must return an error, not panic; with a GPU,
/// an out-of-range ordinal is `NoDevice`.
#[test]
fn open_reports_missing_driver_or_device_as_errors() {
    match Gpu::device_count() {
        Err(radio_kernels::Error::NoDriver) => {
            assert!(matches!(radio_kernels::open(0), Err(radio_kernels::Error::NoDriver)));
        }
        Ok(count) => {
            let err = radio_kernels::open(count + 3).err().expect("ordinal past the last device");
            assert!(matches!(err, radio_kernels::Error::NoDevice { .. }), "{err}");
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn embedded_ptx_targets_sm_80_with_every_selftest_kernel() {
    let tools = radio_kernels::MODULES
        .iter()
        .find(|m| m.family == radio_kernels::Family::Tools && m.arch == radio_kernels::Arch::Sm80)
        .expect("the tools module for sm_80");
    let ptx = tools.ptx;
    assert!(ptx.contains(".target sm_80"));
    assert!(ptx.contains(".version 8.5"));
    for kernel in [
        "selftest_mma_m16n8k8_f16",
        "selftest_mma_m16n8k16_f16",
        "selftest_mma_m16n8k16_f16_f32",
        "selftest_mma_sp_m16n8k16_f16",
        "selftest_mma_sp_unordered_m16n8k16_f16",
        "selftest_mma_sp_universal_f16",
        "selftest_mma_m8n8k16_s8",
        "selftest_mma_m8n8k16_s8_satfinite",
        "selftest_mma_m16n8k32_s8",
        "selftest_mma_m16n8k32_s8_satfinite",
        "selftest_shuffles",
        "selftest_prmt_lop3",
        "selftest_shared",
        "selftest_bank_check",
        "selftest_f16_convert",
        "ceiling_copy",
        "ceiling_l2_read",
        "ceiling_mma_m16n8k32_s8",
    ] {
        assert!(ptx.contains(&format!(".entry {kernel}(")), "{kernel} missing from the PTX");
    }
}

/// The L2 read ceiling reads every vector of its source: each thread's word is the xor of the
/// vectors of its grid-stride share, once per pass (an even number of passes cancels), and a
/// source of a ragged number of words is a typed error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn l2_read_ceiling_reads_every_vector() {
    use radio_kernels::summary::{ceiling_blocks, launch_l2_read, CEILING_THREADS};
    use rand::Rng;
    let gpu = gpu();
    let threads = (ceiling_blocks(&gpu) * CEILING_THREADS) as usize;
    let mut rng = rng();
    // 4.3 vectors per thread: the four-load loop, then the ragged tail.
    let words: Vec<u32> = (0..4 * (threads * 43 / 10)).map(|_| rng.random()).collect();
    let src = gpu.upload(&words).unwrap();
    let mut expected = vec![0u32; threads];
    for (i, v) in words.chunks(4).enumerate() {
        expected[i % threads] ^= v[0] ^ v[1] ^ v[2] ^ v[3];
    }
    for passes in [1, 2, 3] {
        let mut out = gpu.upload(&vec![0xdead_beefu32; threads]).unwrap();
        launch_l2_read(&gpu, &src, passes, &mut out).unwrap();
        let got = out.download().unwrap();
        if passes % 2 == 1 {
            assert!(got == expected, "{passes} passes");
        } else {
            assert!(got.iter().all(|&w| w == 0), "{passes} passes");
        }
    }
    let ragged = gpu.upload(&words[..6]).unwrap();
    let mut out = gpu.alloc::<u32>(threads, 0).unwrap();
    assert!(matches!(
        launch_l2_read(&gpu, &ragged, 1, &mut out),
        Err(radio_kernels::Error::InvalidConfig(_))
    ));
    let mut short = gpu.alloc::<u32>(threads - 1, 0).unwrap();
    assert!(matches!(
        launch_l2_read(&gpu, &src, 1, &mut short),
        Err(radio_kernels::Error::ShapeMismatch { .. })
    ));
}

#[test]
fn cpu_self_checks_pass() {
    for check in selftest::cpu_checks(fresh_seed()) {
        assert_passed(check);
    }
}

/// On compute capability 9.0 only (elsewhere there is no sm_90a module, and the test says so).
fn assert_wgmma(int8: bool) {
    let gpu = gpu();
    match selftest::check_wgmma(&gpu, int8, fresh_seed()).unwrap() {
        Some(check) => assert_passed(check),
        None => println!("{} has no sm_90a module: wgmma not tested", gpu.name()),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wgmma_f16_through_swizzled_shared_memory_matches_cpu() {
    assert_wgmma(false);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wgmma_s8_through_swizzled_shared_memory_is_exact() {
    assert_wgmma(true);
}

/// Buffers carry their CUDA context: a launcher given a buffer of another GPU returns
/// `WrongDevice` before launching (on a machine with one GPU the test says so and passes).
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_of_another_gpu_are_rejected() {
    use radio_kernels::correlator::{Correlator, CorrelatorConfig, Format, Order};
    use radio_kernels::summary::launch_copy;
    use radio_kernels::{Complex, Error};
    let Some(gpu1) = second_gpu() else { return };
    let gpu0 = gpu();
    let config = CorrelatorConfig {
        stations: 8,
        pols: 2,
        channels: 2,
        times: 64,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    let correlator = Correlator::new(&gpu0, config).unwrap();
    let mut rng = rng();
    let input: Vec<u8> = (0..config.input_bytes()).map(|_| rand::Rng::random(&mut rng)).collect();
    let (here, there) = (gpu0.upload(&input).unwrap(), gpu1.upload(&input).unwrap());
    let mut out_here = gpu0.alloc::<Complex<i32>>(config.output_len(), 0xa5).unwrap();
    let mut out_there = gpu1.alloc::<Complex<i32>>(config.output_len(), 0xa5).unwrap();
    assert!(gpu0.owns(&here) && !gpu0.owns(&there) && gpu1.owns(&there));
    let err = correlator.correlate(&there, &mut out_here).unwrap_err();
    assert!(matches!(err, Error::WrongDevice { .. }), "{err}");
    let err = correlator.correlate(&here, &mut out_there).unwrap_err();
    assert!(matches!(err, Error::WrongDevice { .. }), "{err}");
    // Nothing was written on either device.
    let poison = Complex::new(0xa5a5_a5a5_u32 as i32, 0xa5a5_a5a5_u32 as i32);
    assert!(out_there.download().unwrap().iter().all(|&v| v == poison));
    assert!(out_here.download().unwrap().iter().all(|&v| v == poison));
    let words = gpu1.upload(&[1u32, 2, 3, 4]).unwrap();
    let mut copy = gpu0.alloc::<u32>(4, 0).unwrap();
    assert!(matches!(launch_copy(&gpu0, &words, &mut copy), Err(Error::WrongDevice { .. })));
    correlator.correlate(&here, &mut out_here).unwrap();
    let want = radio_kernels::correlator::correlate_reference(&config, &input).unwrap();
    let got = out_here.download().unwrap();
    assert!(got.iter().zip(&want).all(|(g, w)| g.re as i64 == w.re && g.im as i64 == w.im));
}

/// Two handles on one device share its primary context, so their buffers are interchangeable.
#[test]
#[ignore = "needs a CUDA GPU"]
fn two_handles_on_one_device_share_buffers() {
    use radio_kernels::summary::launch_copy;
    let (a, b) = (gpu(), gpu());
    let words: Vec<u32> = (0..64).map(|i| i * 2654435761u32).collect();
    let src = b.upload(&words).unwrap();
    let mut dst = a.alloc::<u32>(64, 0xff).unwrap();
    assert!(a.owns(&src) && b.owns(&dst));
    launch_copy(&a, &src, &mut dst).unwrap();
    assert_eq!(dst.download().unwrap(), words);
}

/// A lent `DeviceBufferMut` uploads, poisons and feeds kernels, and the ceiling launchers
/// launch only their own kernels by name.
#[test]
#[ignore = "needs a CUDA GPU"]
fn lent_buffers_and_named_ceiling_launches_are_checked() {
    use radio_kernels::summary::{ceiling_blocks, fill_random, launch_mma, wgmma_ceiling, CEILING_THREADS};
    use radio_kernels::Error;
    let gpu = gpu();
    let mut buffer = gpu.alloc::<u32>(1024, 0).unwrap();
    buffer.borrow_mut().poison(0x5a).unwrap();
    assert!(buffer.download().unwrap().iter().all(|&w| w == 0x5a5a_5a5a));
    fill_random(&gpu, buffer.borrow_mut(), 9).unwrap();
    let words = buffer.download().unwrap();
    assert!(words.iter().filter(|&&w| w == 0x5a5a_5a5a).count() < 4, "fill_random wrote every word");
    let wrong = buffer.borrow_mut().upload(&[1, 2, 3]).unwrap_err();
    assert!(matches!(wrong, Error::ShapeMismatch { .. }), "{wrong}");
    let mut out = gpu.alloc::<u32>((ceiling_blocks(&gpu) * CEILING_THREADS) as usize, 0).unwrap();
    let err = launch_mma(&gpu, &tools::CEILING_COPY, 1, &mut out).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
    launch_mma(&gpu, &tools::CEILING_MMA_M16N8K32_S8, 1, &mut out).unwrap();
    let err = wgmma_ceiling(&gpu, &tools::CEILING_COPY, 1, 1).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
}

/// The embedded PTX is split by family: every module's entries belong to its family, no
/// kernel is in two modules of one architecture, and every family has an sm_80 module.
#[test]
fn every_module_holds_only_its_familys_kernels() {
    use radio_kernels::{Arch, Family, MODULES};
    let mut seen = std::collections::HashSet::new();
    for module in MODULES {
        assert!(module.ptx.contains(".version 8.5"), "{:?}", module.family);
        let target = match module.arch {
            Arch::Sm80 => ".target sm_80",
            Arch::Sm90a => ".target sm_90a",
        };
        assert!(module.ptx.contains(target), "{:?} {:?}", module.family, module.arch);
        let entries: Vec<&str> = module.ptx.lines().filter_map(modules::entry_name).collect();
        assert!(!entries.is_empty(), "{:?} {:?} has no kernels", module.family, module.arch);
        for entry in entries {
            assert_eq!(Family::of_entry(entry), Some(module.family), "{entry}");
            assert!(seen.insert((entry, module.arch)), "{entry} is in two {:?} modules", module.arch);
        }
    }
    for family in Family::ALL {
        assert!(MODULES.iter().any(|m| m.family == family && m.arch == Arch::Sm80), "{family:?}");
    }
}

/// Opening a device loads no module; each family's module then loads on first use. Prints
/// each module's JIT-compilation time (run with `CUDA_CACHE_DISABLE=1` for a cold driver
/// cache) and checks that it holds its first kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn module_load_times() {
    use radio_kernels::{Arch, MODULES};
    use std::time::Instant;
    let start = Instant::now();
    let gpu = gpu();
    println!("open: {:.3} s (no module loaded)", start.elapsed().as_secs_f64());
    let context = gpu.context().clone();
    for module in MODULES {
        if module.arch == Arch::Sm90a && gpu.compute_capability() != (9, 0) {
            continue;
        }
        let entry = module.ptx.lines().find_map(modules::entry_name).expect("an entry");
        let start = Instant::now();
        let loaded = context.load_module(cudarc::nvrtc::Ptx::from_src(module.ptx)).expect("PTX loads");
        loaded.load_function(entry).expect("the module holds its entry");
        println!(
            "{:<20} {:<7} PTX {:>7} bytes: JIT {:.3} s",
            module.family.name(),
            module.arch.name(),
            module.ptx.len(),
            start.elapsed().as_secs_f64()
        );
    }
}
