//! The file edge, the one place the library touches files: reads, atomic writes and path checks
//! (a clear error in a browser, which has none), where the shipped `assets/...` files are when
//! wgdiff runs from another folder (`shipped.rs`), and `FileStore`, a run's named files.

#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
#[path = "web.rs"]
mod native;

#[cfg(not(target_arch = "wasm32"))]
mod shipped;

pub use native::{
    check_writable_dir, head, list_dir, open, read, read_if_exists, read_io, same_file, write_all_or_none,
    write_atomic,
};
#[cfg(target_arch = "wasm32")]
pub use native::{exists, locate};
#[cfg(not(target_arch = "wasm32"))]
pub use shipped::{exists, locate, shipped_roots};

use crate::{Error, Result};
use std::path::Path;

/// The environment variable naming a folder that holds wgdiff's shipped files (a copy of a
/// checkout's `assets/`), looked in when wgdiff runs outside its checkout (native only).
pub const ASSETS_ENV: &str = "WGDIFF_ASSETS";
use std::path::PathBuf;

/// Checks, before any work, that an output may be written to `path`: nothing there, an empty
/// file, or a file that begins with `starts` (an earlier output of the same `kind`); never a
/// checkpoint, a dataset or a folder given by mistake, which is left as it is.
pub fn check_replaceable(path: &Path, starts: &[u8], kind: &str) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    match head(path, starts.len()) {
        Some(h) if h.is_empty() || h == starts => Ok(()),
        _ => Err(Error::Io {
            what: path.display().to_string(),
            reason: format!(
                "exists and is not {kind} (a checkpoint or other input?); it is left as it is: choose another \
                 output name"
            ),
        }),
    }
}

/// Named files a piece of work reads and writes (a training run's checkpoints and grids),
/// wherever the shell keeps them.
pub trait FileStore {
    /// The bytes of file `name`, or None when there is none.
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>>;
    /// Writes file `name` whole: readers see the old bytes or the new ones, never a mix. The
    /// bytes are taken whole, so a store that keeps them in memory may keep them without a copy.
    fn write(&self, name: &str, bytes: Vec<u8>) -> Result<()>;
    /// How messages name file `name` (a path, or the name a download will take).
    fn describe(&self, name: &str) -> String;
}

/// A [`FileStore`] in the directory `dir` (created on the first write); writes are atomic.
#[derive(Clone, Debug)]
pub struct Folder(pub PathBuf);

impl Folder {
    /// The path of the store's file `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl FileStore for Folder {
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        read_if_exists(&self.path(name))
    }

    fn write(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        write_atomic(&self.path(name), &bytes)
    }

    fn describe(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}
