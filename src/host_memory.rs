//! The host's memory: how much is free, so requests that cannot fit are refused with the figures,
//! and this process's resident set now and at its peak (Linux reads /proc; elsewhere unknown).

/// "need X GiB in memory but only Y GiB are free" when `bytes` exceed the free memory; None
/// when they fit or the free memory is unknown (then the allocation itself is the check).
pub fn shortfall(bytes: u64) -> Option<String> {
    let free = available()?;
    (bytes > free).then(|| {
        format!(
            "need {:.1} GiB in memory but only {:.1} GiB are free",
            gib(bytes),
            gib(free)
        )
    })
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// This process's resident set size now (Linux: VmRSS), in bytes.
pub fn resident_bytes() -> Option<u64> {
    proc_kib("/proc/self/status", "VmRSS:")
}

/// This process's peak resident set size so far (Linux: VmHWM), in bytes.
pub fn peak_resident_bytes() -> Option<u64> {
    proc_kib("/proc/self/status", "VmHWM:")
}

fn available() -> Option<u64> {
    proc_kib("/proc/meminfo", "MemAvailable:")
}

/// The figure of the line starting with `key` in a /proc file (given there in KiB), in bytes.
#[cfg(target_os = "linux")]
fn proc_kib(file: &str, key: &str) -> Option<u64> {
    let text = String::from_utf8(crate::fsio::read_io(file.as_ref()).ok()?).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(not(target_os = "linux"))]
fn proc_kib(_file: &str, _key: &str) -> Option<u64> {
    None
}
