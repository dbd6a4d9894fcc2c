//! MNIST and Fashion-MNIST in the IDX format, raw or gzipped: `load_idx` checks the magic, the
//! dimensions and the exact size of both files; `mnist` finds a split's two files in a folder.

use super::read::{check_host_memory, DataStream};
use super::{Dataset, Split};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Where the project keeps MNIST (the default training data).
pub const DEFAULT_MNIST_DIR: &str = "assets/mnist";

/// The two kinds of IDX file a dataset needs: unsigned bytes in 3 dims (images) or 1 (labels).
#[derive(Clone, Copy, PartialEq)]
enum IdxKind {
    Images,
    Labels,
}

impl IdxKind {
    fn magic(self) -> u32 {
        match self {
            IdxKind::Images => 0x0000_0803,
            IdxKind::Labels => 0x0000_0801,
        }
    }

    fn ndims(self) -> usize {
        (self.magic() & 0xff) as usize
    }

    fn noun(self) -> &'static str {
        match self {
            IdxKind::Images => "images",
            IdxKind::Labels => "labels",
        }
    }

    fn describe(self, dims: &[usize]) -> String {
        match self {
            IdxKind::Images => format!("{} images of {}x{}", dims[0], dims[1], dims[2]),
            IdxKind::Labels => format!("{} labels", dims[0]),
        }
    }

    fn other(self) -> IdxKind {
        match self {
            IdxKind::Images => IdxKind::Labels,
            IdxKind::Labels => IdxKind::Images,
        }
    }
}

const REDOWNLOAD: &str = "the file is truncated — download it again";

/// Reads an IDX file of `kind` from `stream`: the header first, then, after checking the size
/// it promises against the file's size (raw) or deflate's bound (gzip) and the free memory,
/// exactly that many bytes. Returns the dims and the data bytes.
fn read_idx(mut stream: DataStream, path: &Path, kind: IdxKind) -> Result<(Vec<usize>, Vec<u8>)> {
    let header_len = 4 + 4 * kind.ndims();
    let header = stream.read_up_to(header_len as u64);
    let bytes = &header.bytes;
    if bytes.len() < 4 {
        let msg = format!(
            "expected an IDX file (at least {header_len} bytes), {}; {REDOWNLOAD}",
            header.found(0)
        );
        return Err(Error::data(path, msg));
    }
    let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if magic != kind.magic() {
        let hint = if magic == kind.other().magic() {
            format!(
                "this is an IDX {} file — pass the {} file here",
                kind.other().noun(),
                kind.noun()
            )
        } else {
            "this is not an MNIST IDX file, or it is damaged — download it again".to_string()
        };
        let msg = format!(
            "expected the IDX magic 0x{:08x} ({}), found 0x{magic:08x}; {hint}",
            kind.magic(),
            kind.noun()
        );
        return Err(Error::data(path, msg));
    }
    if bytes.len() < header_len {
        let msg = format!(
            "expected a {header_len}-byte IDX header, {}; {REDOWNLOAD}",
            header.found(0)
        );
        return Err(Error::data(path, msg));
    }
    let dims: Vec<usize> = bytes[4..header_len]
        .chunks_exact(4)
        .map(|d| u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize)
        .collect();
    let payload = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    let Some(payload) = payload.filter(|p| p.checked_add(header_len as u64).is_some()) else {
        let msg = format!(
            "the IDX dimensions {dims:?} are impossibly large; the file is damaged — download it again"
        );
        return Err(Error::data(path, msg));
    };
    let expected = payload + header_len as u64;
    let size_error = |found: String, problem: String| {
        let msg = format!(
            "expected {expected} bytes of IDX data ({}), {found}; {problem}",
            kind.describe(&dims)
        );
        Error::data(path, msg)
    };
    if !stream.gzipped() && stream.stored_len() != expected {
        let stored = stream.stored_len();
        let problem = if stored < expected {
            REDOWNLOAD.to_string()
        } else {
            format!(
                "the file has {} bytes too many — it is not a valid IDX file; download it again",
                stored - expected
            )
        };
        return Err(size_error(format!("found {stored} bytes"), problem));
    }
    if expected > stream.max_len() {
        let found = format!(
            "found a gzip file of {} bytes, which inflates to at most {} bytes",
            stream.stored_len(),
            stream.max_len()
        );
        let problem = "the file is truncated or its header is damaged — download it again";
        return Err(size_error(found, problem.into()));
    }
    check_host_memory(path, &kind.describe(&dims), payload)?;
    let data = stream.read_up_to(payload);
    if data.bytes.len() as u64 != payload || stream.has_more() {
        let found = if data.bytes.len() as u64 == payload {
            format!("found more than {expected} bytes after decompressing")
        } else {
            data.found(header_len)
        };
        let problem = if (data.bytes.len() as u64) < payload {
            REDOWNLOAD.to_string()
        } else {
            "the file holds more than its header says — it is not a valid IDX file; download it again"
                .to_string()
        };
        return Err(size_error(found, problem));
    }
    stream.check_stream(path)?;
    Ok((dims, data.bytes))
}

/// Loads an IDX images file (magic 0x00000803: N x H x W bytes) and its labels file (magic
/// 0x00000801: N bytes), each raw or gzipped (recognised by the gzip magic, not the name).
/// The dataset has one channel, is named after the images file, and has `max label + 1` classes.
/// Header sizes are checked against the file sizes before anything else is read.
pub fn load_idx(images_path: impl AsRef<Path>, labels_path: impl AsRef<Path>) -> Result<Dataset> {
    let (images_path, labels_path) = (images_path.as_ref(), labels_path.as_ref());
    let images = read_idx(DataStream::open(images_path)?, images_path, IdxKind::Images)?;
    let labels = read_idx(DataStream::open(labels_path)?, labels_path, IdxKind::Labels)?;
    idx_dataset((images_path, images), (labels_path, labels))
}

/// [`load_idx`] on the files' bytes as read or fetched (the browser has no files); the names
/// are the files' paths or addresses, used in the dataset's name and in errors.
pub fn idx_from_bytes(images: (&Path, Vec<u8>), labels: (&Path, Vec<u8>)) -> Result<Dataset> {
    let image_data = read_idx(DataStream::from_bytes(&images.1), images.0, IdxKind::Images)?;
    let label_data = read_idx(DataStream::from_bytes(&labels.1), labels.0, IdxKind::Labels)?;
    idx_dataset((images.0, image_data), (labels.0, label_data))
}

type IdxData<'a> = (&'a Path, (Vec<usize>, Vec<u8>));

fn idx_dataset(
    (images_path, (dims, pixels)): IdxData,
    (labels_path, (label_dims, labels)): IdxData,
) -> Result<Dataset> {
    if dims[0] != label_dims[0] {
        let msg = format!(
            "holds {} images but {} holds {} labels; pass the labels file of the same split",
            dims[0],
            labels_path.display(),
            label_dims[0]
        );
        return Err(Error::data(images_path, msg));
    }
    let labels: Vec<u32> = labels.iter().map(|&l| l as u32).collect();
    let classes = labels.iter().max().map_or(1, |&m| m as usize + 1);
    Dataset::from_pixels(
        images_path.display().to_string(),
        &pixels,
        labels,
        [1, dims[1], dims[2]],
        classes,
    )
}

/// Finds a split's IDX file in `dir` under any of the names MNIST and Fashion-MNIST ship with.
fn find_idx(dir: &Path, split: Split, kind: IdxKind) -> Result<PathBuf> {
    let prefix = match split {
        Split::Train => "train",
        Split::Test => "t10k",
    };
    let names: Vec<String> = ["-", "."]
        .iter()
        .flat_map(|sep| {
            let base = format!("{prefix}-{}{sep}idx{}-ubyte", kind.noun(), kind.ndims());
            [format!("{base}.gz"), base]
        })
        .collect();
    names
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            let msg = format!(
                "no MNIST {} file for the {split} split; looked for {}; put the four IDX files of MNIST or \
             Fashion-MNIST in this folder",
                kind.noun(),
                names.join(", ")
            );
            Error::data(dir, msg)
        })
}

/// MNIST or Fashion-MNIST (same file names) from `dir`, e.g. [`DEFAULT_MNIST_DIR`]: the files
/// `train-images-idx3-ubyte` / `t10k-labels-idx1-ubyte` etc., with `-` or `.` before `idx`,
/// raw or `.gz`. Named `mnist/train` or `mnist/test`.
pub fn mnist(dir: impl AsRef<Path>, split: Split) -> Result<Dataset> {
    // (the shipped copy, `assets/mnist`, wherever it is found from this folder)
    let dir = &crate::fsio::locate(dir.as_ref());
    let images = find_idx(dir, split, IdxKind::Images)?;
    let labels = find_idx(dir, split, IdxKind::Labels)?;
    let mut data = load_idx(images, labels)?;
    data.name = format!("mnist/{split}");
    Ok(data)
}
