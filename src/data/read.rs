//! Reads a data file whole, gunzipping it when it starts with the gzip magic (1f 8b) whatever
//! its name; a broken gzip stream is kept as a note so size checks can report the figures.

use crate::{Error, Result};
use std::io::Read;
use std::path::Path;

/// A file's contents (decompressed when gzipped).
pub(crate) struct FileBytes {
    pub bytes: Vec<u8>,
    gzipped: bool,
    /// Why decompression stopped early, if it did (`bytes` holds what came out before).
    gzip_error: Option<String>,
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

impl FileBytes {
    pub fn read(path: &Path) -> Result<FileBytes> {
        let raw = std::fs::read(path).map_err(|e| Error::data(path, format!("cannot read the file: {e}")))?;
        Ok(FileBytes::decode(raw))
    }

    /// A file's bytes as read (or fetched, in the browser), gunzipped when gzipped.
    pub fn decode(raw: Vec<u8>) -> FileBytes {
        if !raw.starts_with(&GZIP_MAGIC) {
            return FileBytes {
                bytes: raw,
                gzipped: false,
                gzip_error: None,
            };
        }
        let mut bytes = Vec::new();
        let gzip_error = flate2::read::GzDecoder::new(raw.as_slice())
            .read_to_end(&mut bytes)
            .err();
        FileBytes {
            bytes,
            gzipped: true,
            gzip_error: gzip_error.map(|e| e.to_string()),
        }
    }

    /// "found N bytes", saying whether they were decompressed and why decompression stopped.
    pub fn found(&self) -> String {
        let n = self.bytes.len();
        match (&self.gzip_error, self.gzipped) {
            (Some(e), _) => format!("found {n} bytes before the gzip stream broke off ({e})"),
            (None, true) => format!("found {n} bytes after decompressing"),
            (None, false) => format!("found {n} bytes"),
        }
    }

    /// Errors when the gzip stream was broken even though the decompressed size looked right.
    pub fn check_stream(&self, path: &Path) -> Result<()> {
        match &self.gzip_error {
            Some(e) => Err(Error::data(
                path,
                format!("the gzip stream is corrupt ({e}); the file is damaged — download it again"),
            )),
            None => Ok(()),
        }
    }
}
