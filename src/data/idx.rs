//! MNIST and Fashion-MNIST in the IDX format, raw or gzipped: `load_idx` checks the magic, the
//! dimensions and the exact size of both files; `mnist` finds a split's two files in a folder.

use super::read::FileBytes;
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

/// Checks an IDX file of `kind` and returns its dims and its data bytes.
fn idx_payload<'a>(file: &'a FileBytes, path: &Path, kind: IdxKind) -> Result<(Vec<usize>, &'a [u8])> {
    let bytes = &file.bytes;
    let header_len = 4 + 4 * kind.ndims();
    if bytes.len() < 4 {
        let msg = format!(
            "expected an IDX file (at least {header_len} bytes), {}; {REDOWNLOAD}",
            file.found()
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
            file.found()
        );
        return Err(Error::data(path, msg));
    }
    let dims: Vec<usize> = bytes[4..header_len]
        .chunks_exact(4)
        .map(|d| u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize)
        .collect();
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .and_then(|n| n.checked_add(header_len));
    let Some(expected) = expected else {
        let msg = format!(
            "the IDX dimensions {dims:?} are impossibly large; the file is damaged — download it again"
        );
        return Err(Error::data(path, msg));
    };
    if bytes.len() != expected {
        let problem = if bytes.len() < expected {
            REDOWNLOAD.to_string()
        } else {
            format!(
                "the file has {} bytes too many — it is not a valid IDX file; download it again",
                bytes.len() - expected
            )
        };
        let msg = format!(
            "expected {expected} bytes of IDX data ({}), {}; {problem}",
            kind.describe(&dims),
            file.found()
        );
        return Err(Error::data(path, msg));
    }
    file.check_stream(path)?;
    Ok((dims, &bytes[header_len..]))
}

/// Loads an IDX images file (magic 0x00000803: N x H x W bytes) and its labels file (magic
/// 0x00000801: N bytes), each raw or gzipped (recognised by the gzip magic, not the name).
/// The dataset has one channel, is named after the images file, and has `max label + 1` classes.
pub fn load_idx(images_path: impl AsRef<Path>, labels_path: impl AsRef<Path>) -> Result<Dataset> {
    let (images_path, labels_path) = (images_path.as_ref(), labels_path.as_ref());
    let images = FileBytes::read(images_path)?;
    let labels = FileBytes::read(labels_path)?;
    idx_dataset((images_path, &images), (labels_path, &labels))
}

/// [`load_idx`] on the files' bytes as read or fetched (the browser has no files); the names
/// are the files' paths or addresses, used in the dataset's name and in errors.
pub fn idx_from_bytes(images: (&Path, Vec<u8>), labels: (&Path, Vec<u8>)) -> Result<Dataset> {
    let images_file = FileBytes::decode(images.1);
    let labels_file = FileBytes::decode(labels.1);
    idx_dataset((images.0, &images_file), (labels.0, &labels_file))
}

fn idx_dataset(images: (&Path, &FileBytes), labels: (&Path, &FileBytes)) -> Result<Dataset> {
    let (images_path, labels_path) = (images.0, labels.0);
    let (dims, pixels) = idx_payload(images.1, images_path, IdxKind::Images)?;
    let (label_dims, labels) = idx_payload(labels.1, labels_path, IdxKind::Labels)?;
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
        pixels,
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
    let dir = dir.as_ref();
    let images = find_idx(dir, split, IdxKind::Images)?;
    let labels = find_idx(dir, split, IdxKind::Labels)?;
    let mut data = load_idx(images, labels)?;
    data.name = format!("mnist/{split}");
    Ok(data)
}
