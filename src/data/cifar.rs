//! CIFAR-10 binary batches (`cifar-10-batches-bin`): records of 1 label byte and 3x32x32
//! channel-major pixels; `data_batch_1..5.bin` make the train split, `test_batch.bin` the test.

use super::read::FileBytes;
use super::{Dataset, Split};
use crate::{Error, Result};
use std::path::Path;

const SIDE: usize = 32;
const PIXELS: usize = 3 * SIDE * SIDE;
const RECORD: usize = 1 + PIXELS;
const CLASSES: usize = 10;

/// The file names of a split.
fn batch_files(split: Split) -> Vec<String> {
    match split {
        Split::Train => (1..=5).map(|i| format!("data_batch_{i}.bin")).collect(),
        Split::Test => vec!["test_batch.bin".to_string()],
    }
}

/// Appends one batch file's pixels and labels, checking its size and labels.
fn read_batch(path: &Path, pixels: &mut Vec<u8>, labels: &mut Vec<u32>) -> Result<()> {
    let file = FileBytes::read(path)?;
    let bytes = &file.bytes;
    if bytes.is_empty() || bytes.len() % RECORD != 0 {
        let msg = format!(
            "expected a whole number of {RECORD}-byte CIFAR-10 records (1 label byte + 3x32x32 pixels), {}; \
             the file is truncated — download it again",
            file.found()
        );
        return Err(Error::data(path, msg));
    }
    file.check_stream(path)?;
    for (i, record) in bytes.chunks_exact(RECORD).enumerate() {
        if record[0] as usize >= CLASSES {
            let msg = format!(
                "record {i} has label {}, but CIFAR-10 labels are 0..9; is this a CIFAR-100 file?",
                record[0]
            );
            return Err(Error::data(path, msg));
        }
        labels.push(record[0] as u32);
        pixels.extend_from_slice(&record[1..]);
    }
    Ok(())
}

/// CIFAR-10 from the binary version's folder `dir` (files raw or gzipped); every file of the
/// split must be there. Named `cifar10/train` or `cifar10/test`, 3x32x32, 10 classes.
pub fn cifar10(dir: impl AsRef<Path>, split: Split) -> Result<Dataset> {
    let dir = dir.as_ref();
    let names = batch_files(split);
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for name in &names {
        let path = dir.join(name);
        if !path.is_file() {
            let msg = format!(
                "the CIFAR-10 {split} split needs {}; use the folder of the binary version \
                 (cifar-10-batches-bin)",
                names.join(", ")
            );
            return Err(Error::data(&path, format!("not found; {msg}")));
        }
        read_batch(&path, &mut pixels, &mut labels)?;
    }
    Dataset::from_pixels(
        format!("cifar10/{split}"),
        &pixels,
        labels,
        [3, SIDE, SIDE],
        CLASSES,
    )
}
