//! What the command reads from the host rather than the GPU: the process's CPU time, the
//! NVIDIA driver's version, and random chunk data for the input slots.

/// CPU seconds (user + system) this process has used, all threads: on Linux the sum of
/// each thread's run time (`/proc/self/task/*/schedstat`, nanoseconds), else the process's
/// `utime + stime` (`/proc/self/stat`, clock ticks of 1/100 s); `None` where neither exists.
pub fn process_cpu_seconds() -> Option<f64> {
    schedstat_seconds().or_else(stat_seconds)
}

fn schedstat_seconds() -> Option<f64> {
    let mut total_ns: u128 = 0;
    let mut threads = 0;
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        // A thread that ended since the listing has no file: skip it.
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        total_ns += text.split_whitespace().next()?.parse::<u128>().ok()?;
        threads += 1;
    }
    (threads > 0).then_some(total_ns as f64 * 1e-9)
}

fn stat_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat_seconds(&text)
}

/// `utime + stime` of a `/proc/<pid>/stat` line, in seconds (USER_HZ = 100).
pub(super) fn parse_stat_seconds(text: &str) -> Option<f64> {
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the line are 12 and 13 after the name (state is field 3).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// The NVIDIA kernel driver's version (`/proc/driver/nvidia/version`), where readable.
pub fn driver_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_driver_version(&text)
}

/// The version in the first line of `/proc/driver/nvidia/version` (e.g. `NVRM version:
/// NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ...`): its first word of digits
/// and dots holding a dot.
pub(super) fn parse_driver_version(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    line.split_whitespace()
        .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_string)
}

/// Fills `bytes` from a xorshift stream seeded by `seed`: random chunk data written once.
pub fn fill_host_random(bytes: &mut [u8], seed: u64) {
    let mut state = seed | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut words = bytes.chunks_exact_mut(8);
    for word in &mut words {
        word.copy_from_slice(&next().to_le_bytes());
    }
    let tail = words.into_remainder();
    let last = next().to_le_bytes();
    tail.copy_from_slice(&last[..tail.len()]);
}
