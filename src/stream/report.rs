//! The command's output: the device line and the table of measured rows against the
//! ceilings.
use super::system::driver_version;
use super::{Ceilings, Measured};
use crate::Gpu;

/// A run's ceilings and rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The transfer ceilings measured at the start of the run.
    pub ceilings: Ceilings,
    /// Each engine's run, in table order.
    pub rows: Vec<Measured>,
}

/// The GPU and driver, in one line.
pub fn device_line(gpu: &Gpu) -> String {
    let (major, minor) = gpu.compute_capability();
    let driver = driver_version().unwrap_or_else(|| "unknown".into());
    format!("{} (sm_{major}{minor}, {} SMs), NVIDIA driver {driver}", gpu.name(), gpu.sm_count())
}

/// The rows as a table: engine, configuration, sustained rate, real-time factor, % of the
/// transfer bound (and of the both-directions bound), % of the kernel-only rate, % of the
/// engine's bound, host CPU per second of data; headed by the GPU, driver and ceilings.
pub fn table(gpu: &Gpu, ceilings: &Ceilings, rows: &[Measured]) -> String {
    let mut out =
        format!("\nstreaming engines on {}\n  ceilings: {}\n", device_line(gpu), ceilings.summary());
    out += &format_rows(ceilings, rows);
    out
}

/// The table's header and rows (no GPU needed).
pub fn format_rows(ceilings: &Ceilings, rows: &[Measured]) -> String {
    let width = rows.iter().map(|m| m.setup.configuration.len()).max().unwrap_or(13).max(13);
    let mut out = format!(
        "  {:<10} {:<width$} {:>22} {:>9} {:>9} {:>9} {:>9} {:>14} {:>12}\n",
        "engine",
        "configuration",
        "sustained",
        "real time",
        "transfer",
        "both-dir",
        "kernel",
        "of bound",
        "CPU s/data s"
    );
    for m in rows {
        let (bound, which) = m.of_bound(ceilings);
        let cpu = m.cpu_per_data_s().map_or("n/a".to_string(), |c| format!("{c:.3}"));
        out += &format!(
            "  {:<10} {:<width$} {:>22} {:>8.2}x {:>8.1}% {:>8.1}% {:>8.1}% {:>14} {:>12}\n",
            m.setup.engine,
            m.setup.configuration,
            format!("{:.2} {}", m.rate(), m.setup.rate_unit),
            m.real_time_factor(),
            100.0 * m.of_transfer(ceilings),
            100.0 * m.of_both(ceilings),
            100.0 * m.of_kernel(),
            format!("{:.1}% {which}", 100.0 * bound),
            cpu
        );
    }
    out
}
