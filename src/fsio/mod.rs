//! The file edge, the one place the library touches files: reads, atomic writes and path checks
//! (a clear error in a browser, which has none), and `FileStore`, a run's named files.

#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
#[path = "web.rs"]
mod native;

#[cfg(not(target_arch = "wasm32"))]
pub use native::check_writable_dir;
pub use native::{head, list_dir, open, read, read_if_exists, read_io, same_file, write_atomic};

use crate::Result;
use std::path::PathBuf;

/// Named files a piece of work reads and writes (a training run's checkpoints and grids),
/// wherever the shell keeps them.
pub trait FileStore {
    /// The bytes of file `name`, or None when there is none.
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>>;
    /// Writes file `name` whole: readers see the old bytes or the new ones, never a mix.
    fn write(&self, name: &str, bytes: &[u8]) -> Result<()>;
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

    fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&self.path(name), bytes)
    }

    fn describe(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}
