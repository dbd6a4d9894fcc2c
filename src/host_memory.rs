//! How much memory the host has free (native Linux reads /proc/meminfo; elsewhere unknown),
//! so requests that cannot fit are refused with the figures instead of failing mid-way.

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

#[cfg(target_os = "linux")]
fn available() -> Option<u64> {
    let info = String::from_utf8(crate::fsio::read_io("/proc/meminfo".as_ref()).ok()?).ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(not(target_os = "linux"))]
fn available() -> Option<u64> {
    None
}
