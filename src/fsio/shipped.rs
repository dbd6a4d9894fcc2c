//! Where wgdiff's shipped files are (`assets/...`: the MNIST copy, the classifier and its
//! statistics, the shipped models and schedules) when wgdiff runs outside its checkout: a
//! relative `assets/...` path with nothing there is looked for under `$WGDIFF_ASSETS`, beside
//! the binary and in the folders above it (a checkout's `target/release/`), and in the checkout
//! the binary was built from (where `cargo install --path .` leaves it).

use super::ASSETS_ENV;
use std::path::{Path, PathBuf};

/// The folder every shipped default path starts with.
const SHIPPED: &str = "assets";

/// Where `path` is read from: `path` itself when something is there or it is not a relative
/// `assets/...` path; else the first of [`shipped_roots`] that holds it; else `path` (so that
/// errors name it, with [`not_found_hint`]).
pub fn locate(path: &Path) -> PathBuf {
    if path.exists() {
        return path.to_path_buf();
    }
    match path.strip_prefix(SHIPPED) {
        Ok(rest) if path.is_relative() => shipped_roots()
            .into_iter()
            .map(|root| root.join(rest))
            .find(|p| p.exists())
            .unwrap_or_else(|| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// Whether something is at `path`, wherever [`locate`] finds it.
pub fn exists(path: &Path) -> bool {
    locate(path).exists()
}

/// The folders looked in for a shipped file, in order: `$WGDIFF_ASSETS`; `assets/` beside the
/// binary and in the three folders above it; the checkout the binary was built from.
pub fn shipped_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(dir) = std::env::var_os(ASSETS_ENV) {
        roots.push(PathBuf::from(dir));
    }
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().skip(1).take(4).map(|dir| dir.join(SHIPPED)));
    }
    roots.push(Path::new(env!("CARGO_MANIFEST_DIR")).join(SHIPPED));
    roots
}

/// For an error about a missing shipped file: where it was looked for and the fix; empty for
/// any other path.
pub fn not_found_hint(path: &Path) -> String {
    if path.is_absolute() || path.strip_prefix(SHIPPED).is_err() || exists(path) {
        return String::new();
    }
    let places: Vec<String> = shipped_roots()
        .iter()
        .map(|root| root.display().to_string())
        .collect();
    format!(
        " (a file wgdiff ships; looked for it here and under {}; set {ASSETS_ENV} to the assets folder \
         of a wgdiff checkout)",
        places.join(", ")
    )
}
