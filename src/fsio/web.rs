//! Files in a browser: there is no file system, so every path-based read or write is an error
//! that says so (the page keeps its files in memory and fetches or downloads them).

use crate::{Error, Result};
use std::path::Path;

fn no_file_system(what: &str, path: &Path) -> Error {
    Error::Io {
        what: format!("{what} {}", path.display()),
        reason: "a web page has no file system: the page fetches and downloads its files".into(),
    }
}

fn unsupported() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "a web page has no file system: the page fetches and downloads its files",
    )
}

/// Always an error: a page has no files to open.
pub fn open(_path: &Path) -> std::io::Result<std::fs::File> {
    Err(unsupported())
}

/// Always an error: a page has no folders.
pub fn list_dir(_dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    Err(unsupported())
}

/// None: a page has no files.
pub fn head(_path: &Path, _n: usize) -> Option<Vec<u8>> {
    None
}

/// Always an error: a page has no files to read by path.
pub fn read_io(_path: &Path) -> std::io::Result<Vec<u8>> {
    Err(unsupported())
}

/// Always an error: a page has no files to read by path.
pub fn read(path: &Path) -> Result<Vec<u8>> {
    Err(no_file_system("reading", path))
}

/// Always an error: a page has no files to read by path.
pub fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>> {
    Err(no_file_system("reading", path))
}

/// Always an error: a page has no files to write by path.
pub fn write_atomic(path: &Path, _bytes: &[u8]) -> Result<()> {
    Err(no_file_system("writing", path))
}

/// False: a page has no files.
pub fn same_file(_a: &Path, _b: &Path) -> bool {
    false
}

/// `path` itself: a page fetches its shipped files from its site.
pub fn locate(path: &Path) -> std::path::PathBuf {
    path.to_path_buf()
}

/// False: a page has no files.
pub fn exists(_path: &Path) -> bool {
    false
}

/// Always an error: a page has no folders to write into.
pub fn check_writable_dir(dir: &Path) -> Result<()> {
    Err(no_file_system("writing into", dir))
}

/// Always an error: a page has no folders to write into.
pub fn write_all_or_none(
    dir: &Path,
    _write: impl FnOnce(&Path) -> Result<Vec<String>>,
) -> Result<Vec<String>> {
    Err(no_file_system("writing into", dir))
}
