//! The demo's PNG figures, drawn with `plotters` (pure Rust: its bitmap backend, PNG encoder
//! and `ab_glyph` text with the bundled DejaVu Sans font, `assets/fonts`).
//!
//! No system font is read, so the figures draw the same on a machine without fonts. Every
//! function returns an error rather than panicking: a missing font is plotters'
//! `FontUnavailable`, a file that cannot be written its I/O error, and axis ranges are
//! checked to be finite and non-empty first (plotters loops forever laying out the ticks of
//! an infinite or NaN range, which an overflowed f16 intensity would give).
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// `Err` unless `lo < hi` and both are finite (an axis plotters can lay out).
fn axis(what: &str, lo: f64, hi: f64) -> Fallible<()> {
    if lo.is_finite() && hi.is_finite() && lo < hi {
        Ok(())
    } else {
        Err(format!("{what}: the axis range {lo} .. {hi} is not finite and increasing").into())
    }
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The only font the figures use; if it failed to load, every figure would return
        // plotters' `FontUnavailable` error (reported and skipped by the demo).
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Channel response in dB against frequency in channels (PFB prototype filter).
pub fn channel_response(path: &Path, offsets: &[f64], db: &[f64]) -> Fallible<PathBuf> {
    let lo = offsets.first().copied().unwrap_or(-4.0);
    let hi = offsets.last().copied().unwrap_or(4.0);
    axis("channel response offsets", lo, hi)?;
    register_font();
    let root = BitMapBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("PFB channel response (16-tap Hann-windowed sinc)", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(lo..hi, -140.0..5.0)?;
    chart.configure_mesh().x_desc("frequency offset (channels)").y_desc("response (dB)").draw()?;
    chart.draw_series(LineSeries::new(offsets.iter().zip(db).map(|(&x, &y)| (x, y.max(-140.0))), &BLUE))?;
    root.present()?;
    Ok(path.to_path_buf())
}

/// Visibility amplitude and phase against baseline length, with the phase the brightest
/// source predicts.
pub fn visibilities(path: &Path, title: &str, points: &[(f64, f64, f64, f64)]) -> Fallible<PathBuf> {
    let longest = points.iter().map(|p| p.0).fold(1.0, f64::max) * 1.05;
    let top = points.iter().map(|p| p.1).fold(1e-9, f64::max) * 1.1;
    axis("baseline length", 0.0, longest)?;
    axis("visibility amplitude", 0.0, top)?;
    register_font();
    let root = BitMapBackend::new(path, (900, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(350);
    let mut amplitude = ChartBuilder::on(&upper)
        .caption(title, ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..longest, 0.0..top)?;
    amplitude.configure_mesh().x_desc("baseline (m)").y_desc("|V|").draw()?;
    amplitude.draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 2, BLUE.filled())))?;
    let mut phase = ChartBuilder::on(&lower)
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..longest, -3.2..3.2)?;
    phase.configure_mesh().x_desc("baseline (m)").y_desc("phase (rad)").draw()?;
    phase
        .draw_series(points.iter().map(|p| Circle::new((p.0, p.3), 3, RED.mix(0.5).filled())))?
        .label("predicted (brightest source)")
        .legend(|(x, y)| Circle::new((x, y), 3, RED.filled()));
    phase
        .draw_series(points.iter().map(|p| Circle::new((p.0, p.2), 2, BLUE.filled())))?
        .label("measured")
        .legend(|(x, y)| Circle::new((x, y), 3, BLUE.filled()));
    phase.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(path.to_path_buf())
}

/// An intensity map `[p][q]` (rows p) with markers at the true source positions (grid units
/// of half-integer pixels, (p, q)). `map` must hold `rows x cols` values, both above 0.
pub fn intensity_map(
    path: &Path,
    title: &str,
    map: &[f64],
    rows: u32,
    cols: u32,
    marks: &[(f64, f64)],
) -> Fallible<PathBuf> {
    let cells = (rows as usize).checked_mul(cols as usize);
    if rows == 0 || cols == 0 || cells != Some(map.len()) {
        return Err(format!("intensity map: {} values for {rows} x {cols} cells", map.len()).into());
    }
    register_font();
    let root = BitMapBackend::new(path, (760, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..cols as f64, 0.0..rows as f64)?;
    chart.configure_mesh().disable_mesh().x_desc("q (theta' = q / 2)").y_desc("p (theta = p / 2)").draw()?;
    let (lo, hi) = map.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let span = (hi - lo).max(1e-12);
    chart.draw_series((0..rows).flat_map(|p| (0..cols).map(move |q| (p, q))).map(|(p, q)| {
        let v = ((map[(p * cols + q) as usize] - lo) / span).clamp(0.0, 1.0);
        let color = HSLColor(0.7 - 0.7 * v, 0.9, 0.15 + 0.55 * v);
        Rectangle::new([(q as f64, p as f64), (q as f64 + 1.0, p as f64 + 1.0)], color.filled())
    }))?;
    chart.draw_series(
        marks
            .iter()
            .map(|&(p, q)| Circle::new((q + 0.5, p + 0.5), 12, ShapeStyle::from(&WHITE).stroke_width(3))),
    )?;
    root.present()?;
    Ok(path.to_path_buf())
}

/// Beam power per beam for each beamformer (1 ..= 8 groups, each a panel), on-source beams
/// first.
pub fn beam_power(path: &Path, groups: &[(&str, Vec<(String, f64)>)]) -> Fallible<PathBuf> {
    const MAX_GROUPS: usize = 8;
    if !(1..=MAX_GROUPS).contains(&groups.len()) {
        return Err(format!("beam power: {} groups, expected 1 ..= {MAX_GROUPS}", groups.len()).into());
    }
    for (title, beams) in groups {
        let top = beams.iter().map(|b| b.1).fold(1e-12, f64::max) * 1.15;
        axis(title, 0.0, top)?;
        if beams.is_empty() {
            return Err(format!("{title}: no beams").into());
        }
    }
    register_font();
    // At most 8 panels of 300 pixels: the height fits in u32.
    let root = BitMapBackend::new(path, (900, 300 * groups.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((groups.len().max(1), 1));
    for ((title, beams), area) in groups.iter().zip(areas) {
        let top = beams.iter().map(|b| b.1).fold(1e-12, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(&area)
            .caption(*title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..beams.len() as f64, 0.0..top)?;
        let labels: Vec<String> = beams.iter().map(|b| b.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(beams.len() + 1)
            .x_label_formatter(&|x| labels.get(*x as usize).cloned().unwrap_or_default())
            .y_desc("mean power")
            .draw()?;
        chart.draw_series(beams.iter().enumerate().map(|(i, (name, p))| {
            let color = if name.starts_with("src") { RED } else { BLUE };
            Rectangle::new([(i as f64 + 0.15, 0.0), (i as f64 + 0.85, *p)], color.mix(0.7).filled())
        }))?;
    }
    root.present()?;
    Ok(path.to_path_buf())
}
