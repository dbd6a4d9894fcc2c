//! CIFAR-10 binary batches (`cifar-10-batches-bin`): records of 1 label byte and 3x32x32
//! channel-major pixels; `data_batch_1..5.bin` make the train split, `test_batch.bin` the test.

use super::read::{check_host_memory, DataStream};
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

/// The most records one batch file may hold (the real ones hold 10,000): a gzipped file is
/// read no further than this, so a damaged or hostile one cannot fill the memory.
const MAX_RECORDS_PER_FILE: u64 = 100_000;

/// Appends one batch file's pixels and labels, checking its size and labels. A raw file's size
/// is checked before it is read (and against the free memory), a gzipped one is read no further
/// than [`MAX_RECORDS_PER_FILE`].
fn read_batch(path: &Path, pixels: &mut Vec<u8>, labels: &mut Vec<u32>) -> Result<()> {
    let mut stream = DataStream::open(path)?;
    let whole_records = |len: u64| len > 0 && len % RECORD as u64 == 0;
    let size_error = |found: String| {
        let msg = format!(
            "expected a whole number of {RECORD}-byte CIFAR-10 records (1 label byte + 3x32x32 pixels), \
             {found}; the file is truncated — download it again"
        );
        Error::data(path, msg)
    };
    if !stream.gzipped() && !whole_records(stream.stored_len()) {
        return Err(size_error(format!("found {} bytes", stream.stored_len())));
    }
    let limit = stream.max_len().min(MAX_RECORDS_PER_FILE * RECORD as u64);
    if !stream.gzipped() {
        check_host_memory(path, "the CIFAR-10 records", stream.stored_len())?;
    }
    let file = stream.read_up_to(limit);
    if file.bytes.len() as u64 == limit && stream.has_more() {
        let msg = format!(
            "holds more than {MAX_RECORDS_PER_FILE} records once decompressed; a CIFAR-10 batch file \
             holds 10000 — this is not one, or it is damaged"
        );
        return Err(Error::data(path, msg));
    }
    let bytes = &file.bytes;
    if !whole_records(bytes.len() as u64) {
        return Err(size_error(file.found(0)));
    }
    stream.check_stream(path)?;
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
