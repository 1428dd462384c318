//! What the demo prints and judges: the summary table of the stages ([`report`]) and the
//! science checks ([`science_ok`]): the correlator's dirty image and the FRB map find the
//! brightest source where it is, and every beamformer's beam on it beats the off-source ones.
use super::xengine::{image_span, IMAGE_STEPS};
use super::Outcome;

/// How far (direction cosine) the dirty image's peak may lie from the brightest source: two
/// grid steps of the image search.
pub fn image_tolerance(outcome: &Outcome) -> f64 {
    2.0 * 2.0 * image_span(&outcome.sources) / IMAGE_STEPS as f64
}

/// The science checks: the correlator image and the FRB map find the brightest source where
/// it is, and in every beamformer the beam on it has more than twice the power of any
/// off-source beam.
pub fn science_ok(outcome: &Outcome) -> bool {
    let s = outcome.sources[0];
    let (l, m) = outcome.image_peak;
    let image = (l - s.l).hypot(m - s.m) <= image_tolerance(outcome);
    let beams = outcome.beam_power.iter().all(|power| {
        let off = power[outcome.sources.len()..].iter().copied().fold(0.0, f64::max);
        power[0] > 2.0 * off
    });
    image && outcome.frb_peak == outcome.frb_expected && beams
}

/// The summary table, the science checks and the figures, as printed by the CLI.
pub fn report(outcome: &Outcome) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{:<22} {:<58} {:>10}  {:<38} check",
        "stage", "shape", "time", "throughput, real time"
    );
    for stage in &outcome.stages {
        let time = stage.ms.map_or("-".to_string(), |ms| format!("{ms:.3} ms"));
        let check = match &stage.check {
            Ok(detail) => format!("OK   {detail}"),
            Err(detail) => format!("FAIL {detail}"),
        };
        let _ = writeln!(
            out,
            "{:<22} {:<58} {:>10}  {:<38} {check}",
            stage.name, stage.shape, time, stage.throughput
        );
    }
    let s = outcome.sources[0];
    let (l, m) = outcome.image_peak;
    let verdict = |ok: bool| if ok { "OK  " } else { "FAIL" };
    let _ = writeln!(
        out,
        "\nsky: {:.3} ms of data, {} sources; the brightest at (l, m) = ({:+.4}, {:+.4})",
        1e3 * outcome.duration,
        outcome.sources.len(),
        s.l,
        s.m
    );
    let _ = writeln!(
        out,
        "{} correlator image peak at ({:+.4}, {:+.4}) (within {:.4})",
        verdict((l - s.l).hypot(m - s.m) <= image_tolerance(outcome)),
        l,
        m,
        image_tolerance(outcome)
    );
    let _ = writeln!(
        out,
        "{} FRB map peak at half-integer pixel {:?}, expected {:?}",
        verdict(outcome.frb_peak == outcome.frb_expected),
        outcome.frb_peak,
        outcome.frb_expected
    );
    for (name, power) in ["baseband", "FRB", "delay"].iter().zip(&outcome.beam_power) {
        let off = power[outcome.sources.len()..].iter().copied().fold(0.0, f64::max);
        let on: Vec<String> = power[..outcome.sources.len()].iter().map(|p| format!("{p:.3}")).collect();
        let _ = writeln!(
            out,
            "{} {name} beams: on sources [{}], strongest off-source {off:.3}",
            verdict(power[0] > 2.0 * off),
            on.join(", ")
        );
    }
    if !outcome.images.is_empty() {
        let _ = writeln!(out, "figures:");
        for image in &outcome.images {
            let _ = writeln!(out, "  {}", image.display());
        }
    }
    if !outcome.files.is_empty() {
        let _ = writeln!(out, "data files:");
        for file in &outcome.files {
            let _ = writeln!(out, "  {}", file.display());
        }
    }
    out
}
