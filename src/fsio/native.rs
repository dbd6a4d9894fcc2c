//! Files on a native file system: atomic writes (temporary file + rename), reads that name the
//! file in their errors, and path checks.

use super::shipped::{locate, not_found_hint};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so
/// readers see the old file or the new one, never half of one; creates missing folders. A
/// failed write removes its temporary file, and temporaries of killed writers are removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let io_error = |e: std::io::Error| Error::Io {
        what: format!("writing {}", path.display()),
        reason: e.to_string(),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io_error)?;
    }
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    remove_stale_temporaries(path, &name);
    // Unique per process and per write: threads and processes writing one path at once
    // (autotune caches) each rename their own complete copy.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_file_name(format!("{name}.tmp{}.{write}", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    });
    if written.is_err() {
        // a full disk or a failed rename must not leave the partial copy holding the space
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io_error)
}

/// Creates the folder `dir` if needed and writes and removes a file in it, so work whose
/// results go there fails at its start, not at its end, when it cannot write them.
pub fn check_writable_dir(dir: &Path) -> Result<()> {
    let probe = dir.join(format!(".wgdiff-write-check.{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b"wgdiff"))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| Error::Io {
            what: format!(
                "writing into {} (the results' folder; choose another)",
                dir.display()
            ),
            reason: e.to_string(),
        })
}

/// Writes a set of files into `dir` all or none: `write` writes them into a fresh staging
/// folder inside `dir` and returns their names, then every file there is renamed into `dir`
/// (a rename needs no space). When `write` fails (a full disk half-way through a report) the
/// staging folder is removed and nothing in `dir` is replaced.
pub fn write_all_or_none(
    dir: &Path,
    write: impl FnOnce(&Path) -> Result<Vec<String>>,
) -> Result<Vec<String>> {
    let staging = dir.join(format!(".wgdiff-staging.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let io_error = |what: String| {
        move |e: std::io::Error| Error::Io {
            what,
            reason: e.to_string(),
        }
    };
    let written = std::fs::create_dir_all(&staging)
        .map_err(io_error(format!("creating {}", staging.display())))
        .and_then(|()| write(&staging));
    let names = match written {
        Ok(names) => names,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    let staged = list_dir(&staging).map_err(io_error(format!("listing {}", staging.display())))?;
    for file in staged {
        let target = dir.join(file.file_name().unwrap_or_default());
        std::fs::rename(&file, &target)
            .map_err(io_error(format!("moving {} into place", target.display())))?;
    }
    let _ = std::fs::remove_dir_all(&staging);
    Ok(names)
}

/// True when both paths name the same existing file (an output that would replace an input).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Removes `<name>.tmp<PID>[.<write>]` files beside `path` left by writers that were killed
/// (their process no longer exists). Only where `/proc` tells which processes live (Linux).
fn remove_stale_temporaries(path: &Path, name: &str) {
    let proc_fs = Path::new("/proc");
    if !proc_fs.join("self").exists() {
        return;
    }
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.to_path_buf(),
        None => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let prefix = format!("{name}.tmp");
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file_name
            .strip_prefix(&prefix)
            .and_then(|suffix| suffix.split('.').next())
        else {
            continue;
        };
        let dead = pid
            .parse::<u32>()
            .is_ok_and(|pid| !proc_fs.join(pid.to_string()).exists());
        if dead {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The bytes of the file at `path` (a shipped `assets/...` path wherever [`locate`] finds it),
/// or None when there is no such file.
pub fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(locate(path)) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Io {
            what: format!("reading {}", path.display()),
            reason: e.to_string(),
        }),
    }
}

/// The file at `path` (located as [`read`] does), open for streaming reads (large datasets are
/// read in bounded memory).
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(locate(path)).map_err(|e| with_hint(e, path))
}

/// The paths of the entries directly in the folder `dir` (located as [`read`] does).
pub fn list_dir(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::read_dir(locate(dir))
        .map_err(|e| with_hint(e, dir))?
        .map(|entry| entry.map(|e| e.path()))
        .collect()
}

/// The first `n` bytes of the file at `path` (fewer when it is shorter), or None when there
/// is no file there.
pub fn head(path: &Path, n: usize) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(locate(path)).ok()?;
    let mut bytes = Vec::with_capacity(n);
    file.take(n as u64).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The bytes of the file at `path` (located as [`read`] does), with the platform's own error
/// (for callers that name the file and the fix themselves).
pub fn read_io(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(locate(path)).map_err(|e| with_hint(e, path))
}

/// The bytes of the file at `path`, a shipped `assets/...` path wherever [`locate`] finds it;
/// an error names the file (and, for a shipped one, where it was looked for).
pub fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(locate(path)).map_err(|e| Error::Io {
        what: format!("reading {}", path.display()),
        reason: with_hint(e, path).to_string(),
    })
}

/// `e`, and where a missing shipped file was looked for.
fn with_hint(e: std::io::Error, path: &Path) -> std::io::Error {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            let hint = not_found_hint(path);
            match hint.is_empty() {
                true => e,
                false => std::io::Error::new(e.kind(), format!("{e}{hint}")),
            }
        }
        _ => e,
    }
}
