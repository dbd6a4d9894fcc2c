//! Reads data files with bounded memory: raw, or gunzipped on the fly when they start with the
//! gzip magic (1f 8b) whatever their name; callers read a header first and then only what it promises.

use crate::{Error, Result};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Deflate's best compression ratio is 1032:1, so a gzip stream of n bytes inflates to at most
/// this many times n (plus the block headers, which the margin covers).
const DEFLATE_MAX_RATIO: u64 = 1040;

/// A data file (or fetched bytes) opened for reading.
pub(crate) struct DataStream<'a> {
    reader: Box<dyn Read + 'a>,
    gzipped: bool,
    /// Bytes as stored (compressed when gzipped).
    stored_len: u64,
    /// Why reading stopped early, if it did.
    error: Option<String>,
}

/// What [`DataStream::read_up_to`] read (decompressed when gzipped).
pub(crate) struct FileBytes {
    pub bytes: Vec<u8>,
    gzipped: bool,
    /// Why reading stopped before the limit, if it did (`bytes` holds what came out before).
    error: Option<String>,
}

impl DataStream<'static> {
    /// Opens `path`; nothing but the first two bytes is read yet.
    pub fn open(path: &Path) -> Result<DataStream<'static>> {
        let cannot = |e: std::io::Error| Error::data(path, format!("cannot read the file: {e}"));
        let file = crate::fsio::open(path).map_err(cannot)?;
        let stored_len = file.metadata().map_err(cannot)?.len();
        let mut reader = BufReader::new(file);
        let gzipped = reader.fill_buf().map_err(cannot)?.starts_with(&GZIP_MAGIC);
        Ok(DataStream::new(Box::new(reader), gzipped, stored_len))
    }
}

impl<'a> DataStream<'a> {
    /// A file's bytes as read or fetched (the browser has no files).
    pub fn from_bytes(raw: &'a [u8]) -> DataStream<'a> {
        DataStream::new(Box::new(raw), raw.starts_with(&GZIP_MAGIC), raw.len() as u64)
    }

    fn new(reader: Box<dyn Read + 'a>, gzipped: bool, stored_len: u64) -> DataStream<'a> {
        let reader: Box<dyn Read + 'a> = if gzipped {
            Box::new(flate2::read::GzDecoder::new(reader))
        } else {
            reader
        };
        DataStream {
            reader,
            gzipped,
            stored_len,
            error: None,
        }
    }

    /// Whether the file is gzipped.
    pub fn gzipped(&self) -> bool {
        self.gzipped
    }

    /// The file's size as stored.
    pub fn stored_len(&self) -> u64 {
        self.stored_len
    }

    /// The most bytes the file can yield: its size when raw, deflate's bound when gzipped.
    pub fn max_len(&self) -> u64 {
        if self.gzipped {
            self.stored_len.saturating_mul(DEFLATE_MAX_RATIO)
        } else {
            self.stored_len
        }
    }

    /// Reads the next bytes, at most `limit` (decompressed); the buffer grows with what
    /// actually arrives, so a header's promise allocates nothing by itself. A read error
    /// (a broken gzip stream, I/O) ends this and every later read and is reported by the
    /// result.
    pub fn read_up_to(&mut self, limit: u64) -> FileBytes {
        let mut bytes = Vec::new();
        if self.error.is_none() {
            if let Err(e) = (&mut self.reader).take(limit).read_to_end(&mut bytes) {
                self.error = Some(e.to_string());
            }
        }
        FileBytes {
            bytes,
            gzipped: self.gzipped,
            error: self.error.clone(),
        }
    }

    /// Errors when reading broke off (a corrupt gzip stream, an I/O error), even where the
    /// sizes looked right.
    pub fn check_stream(&self, path: &Path) -> Result<()> {
        match (&self.error, self.gzipped) {
            (Some(e), true) => Err(Error::data(
                path,
                format!("the gzip stream is corrupt ({e}); the file is damaged — download it again"),
            )),
            (Some(e), false) => Err(Error::data(path, format!("cannot read the file: {e}"))),
            (None, _) => Ok(()),
        }
    }

    /// Whether anything is left after what was read (reads at most one byte).
    pub fn has_more(&mut self) -> bool {
        !self.read_up_to(1).bytes.is_empty()
    }
}

impl FileBytes {
    /// "found N bytes" (N = `before` + the bytes read here), saying whether they were
    /// decompressed and why reading stopped.
    pub fn found(&self, before: usize) -> String {
        let n = before + self.bytes.len();
        match (&self.error, self.gzipped) {
            (Some(e), true) => format!("found {n} bytes before the gzip stream broke off ({e})"),
            (Some(e), false) => format!("found {n} bytes before reading failed ({e})"),
            (None, true) => format!("found {n} bytes after decompressing"),
            (None, false) => format!("found {n} bytes"),
        }
    }
}

/// Host bytes a loaded pixel takes: the byte read plus the f32 the dataset keeps.
const LOADED_BYTES_PER_PIXEL: u64 = 1 + 4;

/// Errors, naming `path` and the memory needed, when `pixels` pixels (`what`, e.g. "60000
/// images of 28x28") would not fit in the memory the system has free.
pub(crate) fn check_host_memory(path: &Path, what: &str, pixels: u64) -> Result<()> {
    let bytes = pixels.saturating_mul(LOADED_BYTES_PER_PIXEL);
    crate::host_memory::shortfall(bytes).map_or(Ok(()), |short| {
        Err(Error::data(
            path,
            format!("{what} {short}; use a smaller dataset or free memory"),
        ))
    })
}
