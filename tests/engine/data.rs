//! Datasets: MNIST from assets/mnist, IDX/CIFAR/folder loaders on files written to a temp
//! folder (and their errors), the resumable Batcher, and the PNG grid writer.

use crate::common::gpu;
use flate2::write::GzEncoder;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wgdiff::data::{
    cifar10, grid_image, image_folder, load_idx, mnist, save_grid, Batcher, BatcherState, DataSource,
    Dataset, GridLayout, Split,
};
use wgdiff::Error;

const MNIST_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/mnist");

/// A fresh, empty folder under the system temp dir, unique to this test.
fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wgdiff-data-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The error's message; fails the test when there is no error.
fn message<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    result.expect_err("an error").to_string()
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for part in parts {
        assert!(msg.contains(part), "error {msg:?} does not mention {part:?}");
    }
}

/// An IDX file: magic, big-endian dims, payload.
fn idx_bytes(magic: u32, dims: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut out = magic.to_be_bytes().to_vec();
    dims.iter().for_each(|d| out.extend_from_slice(&d.to_be_bytes()));
    out.extend_from_slice(payload);
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn gunzip(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Writes 3 images of 4x5 (pixel = 7 * i + j) and their labels 2, 0, 1 as raw IDX files.
fn write_small_idx(dir: &Path) -> (PathBuf, PathBuf) {
    let pixels: Vec<u8> = (0..60u32).map(|i| (i * 7 % 256) as u8).collect();
    let (images, labels) = (dir.join("images.idx3"), dir.join("labels.idx1"));
    std::fs::write(&images, idx_bytes(0x803, &[3, 4, 5], &pixels)).unwrap();
    std::fs::write(&labels, idx_bytes(0x801, &[3], &[2, 0, 1])).unwrap();
    (images, labels)
}

#[test]
fn mnist_test_split_loads_from_assets() {
    let data = mnist(MNIST_DIR, Split::Test).unwrap();
    assert_eq!(
        (data.len(), data.channels, data.height, data.width),
        (10000, 1, 28, 28)
    );
    assert_eq!((data.name.as_str(), data.classes), ("mnist/test", 10));
    assert_eq!(data.images.len(), 10000 * 28 * 28);
    assert!(data.images.iter().all(|v| (-1.0..=1.0).contains(v)));
    assert_eq!(data.images.iter().cloned().fold(f32::MIN, f32::max), 1.0);
    assert_eq!(data.images.iter().cloned().fold(f32::MAX, f32::min), -1.0);
    assert!(data.labels.iter().all(|&l| l < 10));
    assert_eq!(data.labels[0], 7);
    assert_eq!(data.image(1).len(), 28 * 28);
}

#[test]
fn mnist_train_split_starts_with_a_five() {
    let data = mnist(MNIST_DIR, Split::Train).unwrap();
    assert_eq!((data.len(), data.name.as_str()), (60000, "mnist/train"));
    assert_eq!(data.labels[0], 5);
}

#[test]
fn raw_idx_files_load_like_the_gzipped_ones() {
    let dir = temp_dir("raw-idx");
    let gz = Path::new(MNIST_DIR);
    for (from, to) in [
        ("t10k-images.idx3-ubyte.gz", "t10k-images-idx3-ubyte"),
        ("t10k-labels.idx1-ubyte.gz", "t10k-labels-idx1-ubyte"),
    ] {
        std::fs::write(dir.join(to), gunzip(&gz.join(from))).unwrap();
    }
    let raw = mnist(&dir, Split::Test).unwrap();
    assert_eq!(raw, mnist(MNIST_DIR, Split::Test).unwrap());
    let direct = load_idx(
        dir.join("t10k-images-idx3-ubyte"),
        dir.join("t10k-labels-idx1-ubyte"),
    )
    .unwrap();
    assert_eq!((direct.images, direct.labels), (raw.images, raw.labels));
}

#[test]
fn small_idx_scales_pixels_and_counts_classes() {
    let dir = temp_dir("small-idx");
    let (images, labels) = write_small_idx(&dir);
    let data = load_idx(&images, &labels).unwrap();
    assert_eq!((data.len(), data.height, data.width, data.classes), (3, 4, 5, 3));
    assert_eq!(data.labels, vec![2, 0, 1]);
    assert_eq!(data.image(0)[1], 7.0 / 127.5 - 1.0);
    // A gzipped copy under a name without .gz is recognised by its magic.
    std::fs::write(&images, gzip(&std::fs::read(&images).unwrap())).unwrap();
    assert_eq!(load_idx(&images, &labels).unwrap(), data);
}

#[test]
fn truncated_gzip_idx_names_the_file_and_sizes() {
    let dir = temp_dir("truncated-gz");
    let images = dir.join("t10k-images-idx3-ubyte.gz");
    let whole = std::fs::read(Path::new(MNIST_DIR).join("t10k-images.idx3-ubyte.gz")).unwrap();
    std::fs::write(&images, &whole[..1000]).unwrap();
    std::fs::copy(
        Path::new(MNIST_DIR).join("t10k-labels.idx1-ubyte.gz"),
        dir.join("t10k-labels-idx1-ubyte.gz"),
    )
    .unwrap();
    let msg = message(mnist(&dir, Split::Test));
    assert_mentions(
        &msg,
        &[
            "t10k-images-idx3-ubyte.gz",
            "expected 7840016 bytes",
            "10000 images of 28x28",
            "found ",
            "download",
        ],
    );
}

#[test]
fn corrupt_gzip_stream_names_the_file() {
    let dir = temp_dir("corrupt-gz");
    let (images, labels) = write_small_idx(&dir);
    let mut gz = gzip(&std::fs::read(&images).unwrap());
    let middle = gz.len() / 2;
    gz[middle..].iter_mut().for_each(|b| *b ^= 0x5a);
    std::fs::write(&images, gz).unwrap();
    assert_mentions(&message(load_idx(&images, &labels)), &["images.idx3", "gzip"]);
}

#[test]
fn truncated_raw_idx_names_the_file_and_sizes() {
    let dir = temp_dir("truncated-raw");
    let (images, labels) = write_small_idx(&dir);
    let bytes = std::fs::read(&images).unwrap();
    std::fs::write(&images, &bytes[..50]).unwrap();
    let msg = message(load_idx(&images, &labels));
    assert_mentions(
        &msg,
        &[
            "images.idx3",
            "expected 76 bytes",
            "(3 images of 4x5)",
            "found 50 bytes",
            "truncated",
        ],
    );
    std::fs::write(&images, &bytes[..10]).unwrap();
    assert_mentions(
        &message(load_idx(&images, &labels)),
        &["images.idx3", "16-byte IDX header", "found 10 bytes"],
    );
}

/// A gzip bomb: a header promising 3 labels, then 64 MiB of zeros (64 KiB compressed). Before
/// header-bounded reads, all of it was inflated before the size check.
#[test]
fn idx_gzip_inflation_stops_at_what_the_header_promises() {
    let dir = temp_dir("gzip-bomb");
    let (images, labels) = write_small_idx(&dir);
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&idx_bytes(0x801, &[3], &[2, 0, 1])).unwrap();
    let zeros = vec![0u8; 1 << 20];
    (0..64).for_each(|_| encoder.write_all(&zeros).unwrap());
    std::fs::write(&labels, encoder.finish().unwrap()).unwrap();
    let msg = message(load_idx(&images, &labels));
    assert_mentions(
        &msg,
        &[
            "labels.idx1",
            "expected 11 bytes",
            "3 labels",
            "more than",
            "not a valid IDX file",
        ],
    );
    // A header promising more than a gzip of this size can inflate to is refused unread.
    let tiny = gzip(&idx_bytes(0x803, &[60_000, 280, 280], &[1, 2, 3]));
    std::fs::write(&images, &tiny).unwrap();
    let msg = message(load_idx(&images, &labels));
    assert_mentions(
        &msg,
        &[
            "images.idx3",
            "60000 images of 280x280",
            "inflates to at most",
            "download it again",
        ],
    );
}

/// A 16 GiB sparse raw file whose header says 3 images: refused from its size, unread (before,
/// the loader read all 16 GiB first).
#[test]
fn raw_idx_sizes_are_checked_before_reading() {
    let dir = temp_dir("sparse-raw");
    let (images, labels) = write_small_idx(&dir);
    let file = std::fs::OpenOptions::new().write(true).open(&images).unwrap();
    file.set_len(16 << 30).unwrap();
    drop(file);
    let msg = message(load_idx(&images, &labels));
    assert_mentions(
        &msg,
        &[
            "images.idx3",
            "expected 76 bytes",
            "found 17179869184 bytes",
            "bytes too many",
        ],
    );
    // A header whose images would not fit in the free memory is refused with the figure.
    std::fs::write(&images, idx_bytes(0x803, &[4_000_000, 1000, 1000], &[])).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&images).unwrap();
    file.set_len(16 + 4_000_000_000_000).unwrap();
    drop(file);
    let msg = message(load_idx(&images, &labels));
    assert_mentions(
        &msg,
        &["images.idx3", "4000000 images of 1000x1000", "GiB", "free"],
    );
}

#[test]
fn wrong_idx_magic_says_which_file_and_magic() {
    let dir = temp_dir("magic");
    let (images, labels) = write_small_idx(&dir);
    let msg = message(load_idx(&labels, &images));
    assert_mentions(
        &msg,
        &[
            "labels.idx1",
            "expected the IDX magic 0x00000803",
            "found 0x00000801",
            "labels file",
        ],
    );
    std::fs::write(&images, b"PK\x03\x04 not an idx file at all").unwrap();
    assert_mentions(
        &message(load_idx(&images, &labels)),
        &["images.idx3", "found 0x504b0304"],
    );
}

#[test]
fn idx_image_and_label_counts_must_match() {
    let dir = temp_dir("count");
    let (images, labels) = write_small_idx(&dir);
    std::fs::write(&labels, idx_bytes(0x801, &[2], &[1, 1])).unwrap();
    let msg = message(load_idx(&images, &labels));
    assert_mentions(
        &msg,
        &["images.idx3", "holds 3 images", "labels.idx1 holds 2 labels"],
    );
}

#[test]
fn missing_mnist_files_list_the_names_looked_for() {
    let dir = temp_dir("missing-mnist");
    let msg = message(mnist(&dir, Split::Train));
    assert_mentions(
        &msg,
        &[
            "train-images-idx3-ubyte.gz",
            "train-images.idx3-ubyte",
            "train split",
        ],
    );
}

/// A CIFAR-10 record: label, then channel c filled with `label * 10 + c`, pixel 0 of red = 200.
fn cifar_record(label: u8) -> Vec<u8> {
    let mut record = vec![label];
    for c in 0..3u8 {
        record.extend(std::iter::repeat_n(label * 10 + c, 1024));
    }
    record[1] = 200;
    record
}

#[test]
fn cifar_batch_loads_records_channel_major() {
    let dir = temp_dir("cifar");
    std::fs::write(
        dir.join("test_batch.bin"),
        [cifar_record(3), cifar_record(9)].concat(),
    )
    .unwrap();
    let data = cifar10(&dir, Split::Test).unwrap();
    assert_eq!(
        (data.len(), data.channels, data.height, data.width, data.classes),
        (2, 3, 32, 32, 10)
    );
    assert_eq!(
        (data.name.as_str(), data.labels.clone()),
        ("cifar10/test", vec![3, 9])
    );
    let image = data.image(1);
    assert_eq!(image[0], 200.0 / 127.5 - 1.0);
    assert_eq!(image[1], 90.0 / 127.5 - 1.0);
    assert_eq!(image[1024], 91.0 / 127.5 - 1.0);
    assert_eq!(image[3071], 92.0 / 127.5 - 1.0);
}

#[test]
fn cifar_errors_name_the_file_and_record_size() {
    let dir = temp_dir("cifar-bad");
    let path = dir.join("test_batch.bin");
    std::fs::write(&path, &[cifar_record(3), cifar_record(9)].concat()[..6046]).unwrap();
    let msg = message(cifar10(&dir, Split::Test));
    assert_mentions(&msg, &["test_batch.bin", "3073-byte", "found 6046 bytes"]);
    std::fs::write(&path, cifar_record(12)).unwrap();
    assert_mentions(
        &message(cifar10(&dir, Split::Test)),
        &["test_batch.bin", "record 0 has label 12"],
    );
    assert_mentions(
        &message(cifar10(&dir, Split::Train)),
        &["data_batch_1.bin", "not found", "data_batch_5.bin"],
    );
}

/// Writes gray a.png (6x8, pixel = 10 * x), RGB b.png (6x8, pure red), c.jpg (6x8) and a note.
fn write_folder(dir: &Path) {
    image::GrayImage::from_fn(8, 6, |x, _| image::Luma([10 * x as u8]))
        .save(dir.join("a.png"))
        .unwrap();
    image::RgbImage::from_pixel(8, 6, image::Rgb([255, 0, 0]))
        .save(dir.join("b.png"))
        .unwrap();
    image::RgbImage::from_pixel(8, 6, image::Rgb([0, 0, 255]))
        .save(dir.join("c.JPG"))
        .unwrap();
    std::fs::write(dir.join("notes.txt"), "not an image").unwrap();
}

#[test]
fn image_folder_loads_grayscale_rgb_and_resized() {
    let dir = temp_dir("folder");
    write_folder(&dir);
    let gray = image_folder(&dir, None, 1).unwrap();
    assert_eq!(
        (gray.len(), gray.channels, gray.height, gray.width, gray.classes),
        (3, 1, 6, 8, 1)
    );
    assert_eq!(gray.labels, vec![0, 0, 0]);
    assert_eq!(gray.image(0)[3], 30.0 / 127.5 - 1.0);
    let rgb = image_folder(&dir, None, 3).unwrap();
    assert_eq!((rgb.channels, rgb.height, rgb.width), (3, 6, 8));
    let red = rgb.image(1);
    assert_eq!((red[0], red[48], red[96]), (1.0, -1.0, -1.0));
    let blue = rgb.image(2);
    assert!(
        blue[96] > 0.9 && blue[0] < -0.9,
        "JPEG blue: {} {}",
        blue[96],
        blue[0]
    );
    let small = image_folder(&dir, Some((4, 3)), 3).unwrap();
    assert_eq!(
        (small.len(), small.channels, small.height, small.width),
        (3, 3, 4, 3)
    );
    assert_eq!(small.images.len(), 3 * 3 * 4 * 3);
}

#[test]
fn image_folder_errors_name_the_file() {
    let dir = temp_dir("folder-bad");
    assert_mentions(&message(image_folder(&dir, None, 3)), &["folder-bad", "no .png"]);
    write_folder(&dir);
    assert_mentions(
        &message(image_folder(&dir, None, 4)),
        &["channels must be 1", "got 4"],
    );
    image::GrayImage::new(5, 5).save(dir.join("d.png")).unwrap();
    let msg = message(image_folder(&dir, None, 1));
    assert_mentions(&msg, &["d.png", "is 5x5", "a.png is 6x8", "size"]);
    assert_eq!(image_folder(&dir, Some((5, 5)), 1).unwrap().len(), 4);
    std::fs::write(dir.join("e.png"), b"\x89PNG but then nothing useful").unwrap();
    assert_mentions(
        &message(image_folder(&dir, Some((5, 5)), 1)),
        &["e.png", "cannot decode"],
    );
    // Resized to 200000x200000, the five images would need ~600 TB: refused before decoding.
    assert_mentions(
        &message(image_folder(&dir, Some((200_000, 200_000)), 3)),
        &["folder-bad", "5 images of 3x200000x200000", "GiB in memory"],
    );
}

#[test]
fn data_source_strings_parse_and_load() {
    let parse = |s: &str| s.parse::<DataSource>();
    assert_eq!(parse("mnist").unwrap(), DataSource::Mnist("assets/mnist".into()));
    assert_eq!(
        parse("fashion:data/f").unwrap(),
        DataSource::Fashion("data/f".into())
    );
    assert_eq!(parse("cifar10:c").unwrap(), DataSource::Cifar10("c".into()));
    assert_eq!(
        parse("folder:C:\\faces").unwrap(),
        DataSource::Folder {
            dir: "C:\\faces".into(),
            size: None,
            channels: 3
        }
    );
    assert_mentions(&message(parse("cifar10")), &["\"cifar10\"", "cifar10:DIR"]);
    assert_mentions(
        &message(parse("imagenet:x")),
        &["unknown kind \"imagenet\"", "mnist:DIR", "folder:DIR"],
    );
    // A bare folder: its kind read from its files.
    assert_eq!(parse(MNIST_DIR).unwrap(), DataSource::Mnist(MNIST_DIR.into()));
    let dir = std::env::temp_dir().join(format!("wgdiff-bare-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bare = dir.display().to_string();
    assert_mentions(&message(parse(&bare)), &["holds no MNIST IDX files", "mnist:DIR"]);
    image::RgbImage::new(4, 4).save(dir.join("a.png")).unwrap();
    assert_eq!(
        parse(&bare).unwrap(),
        DataSource::Folder {
            dir: dir.clone(),
            size: None,
            channels: 3
        }
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let fashion = parse(&format!("fashion:{MNIST_DIR}"))
        .unwrap()
        .load(Split::Test)
        .unwrap();
    assert_eq!((fashion.name.as_str(), fashion.len()), ("fashion/test", 10000));
}

/// 10 images of 1x2x3 whose pixels are 6 * i + j; label = i % 4.
fn counting_dataset(n: usize) -> Arc<Dataset> {
    let pixels: Vec<u8> = (0..n * 6).map(|p| p as u8).collect();
    let labels = (0..n as u32).map(|i| i % 4).collect();
    Arc::new(Dataset::from_pixels("counting", &pixels, labels, [1, 2, 3], 4).unwrap())
}

fn batches(batcher: &mut Batcher, count: usize) -> Vec<wgdiff::data::Batch> {
    (0..count).map(|_| batcher.next_batch()).collect()
}

#[test]
fn batcher_same_seed_same_batches_other_seed_differs() {
    let data = counting_dataset(10);
    let run = |seed| batches(&mut Batcher::new(data.clone(), 3, seed, true).unwrap(), 7);
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn batcher_shows_every_image_once_per_epoch() {
    let data = counting_dataset(12);
    let mut batcher = Batcher::new(data.clone(), 4, 5, false).unwrap();
    assert_eq!(batcher.batches_per_epoch(), 3);
    let mut epochs = Vec::new();
    for _ in 0..2 {
        let mut seen: Vec<usize> = batches(&mut batcher, 3)
            .into_iter()
            .flat_map(|b| b.indices)
            .collect();
        epochs.push(seen.clone());
        seen.sort();
        assert_eq!(seen, (0..12).collect::<Vec<_>>());
    }
    assert_ne!(epochs[0], epochs[1], "epochs reshuffle");
    let batch = batcher.next_batch();
    assert_eq!(batcher.state().epoch, 2);
    assert_eq!(batch.shape, [4, 1, 2, 3]);
    for (k, &i) in batch.indices.iter().enumerate() {
        assert_eq!(&batch.images[k * 6..k * 6 + 6], data.image(i));
        assert_eq!(batch.labels[k], data.labels[i]);
    }
    // 10 images in batches of 4: two full batches per epoch, the other 2 images skipped.
    let mut partial = Batcher::new(counting_dataset(10), 4, 5, false).unwrap();
    let mut seen: Vec<usize> = batches(&mut partial, 2)
        .into_iter()
        .flat_map(|b| b.indices)
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!((seen.len(), partial.state().epoch), (8, 0));
    partial.next_batch();
    assert_eq!(partial.state().epoch, 1);
}

#[test]
fn batcher_resumes_with_the_identical_next_batch() {
    let data = counting_dataset(10);
    let mut batcher = Batcher::new(data.clone(), 3, 42, true).unwrap();
    for steps in [1, 4, 5] {
        batches(&mut batcher, steps);
        let saved = serde_json::to_string(batcher.state()).unwrap();
        let state: BatcherState = serde_json::from_str(&saved).unwrap();
        let mut resumed = Batcher::from_state(data.clone(), state).unwrap();
        assert_eq!(batches(&mut resumed, 4), batches(&mut batcher.clone(), 4));
    }
}

#[test]
fn batcher_flip_mirrors_about_half_the_images() {
    let data = counting_dataset(10);
    let mut batcher = Batcher::new(data.clone(), 5, 7, true).unwrap();
    let (mut flipped, mut kept) = (0, 0);
    for batch in batches(&mut batcher, 40) {
        for (k, &i) in batch.indices.iter().enumerate() {
            let got = &batch.images[k * 6..k * 6 + 6];
            let image = data.image(i);
            let mirrored: Vec<f32> = image
                .chunks(3)
                .flat_map(|row| row.iter().rev().copied())
                .collect();
            if got == image {
                kept += 1;
            } else {
                assert_eq!(got, mirrored.as_slice());
                flipped += 1;
            }
        }
    }
    assert!(
        (70..=130).contains(&flipped),
        "{flipped} of {} flipped",
        flipped + kept
    );
    let mut plain = Batcher::new(data.clone(), 5, 7, false).unwrap();
    assert!(batches(&mut plain, 10).iter().all(|b| b
        .indices
        .iter()
        .enumerate()
        .all(|(k, &i)| &b.images[k * 6..k * 6 + 6] == data.image(i))));
}

#[test]
fn batcher_rejects_mismatched_state_and_batch_size() {
    let data = counting_dataset(10);
    assert_mentions(
        &message(Batcher::new(data.clone(), 11, 0, false).map(|_| ())),
        &["counting", "batch size of 11"],
    );
    let state = Batcher::new(counting_dataset(12), 4, 0, false)
        .unwrap()
        .state()
        .clone();
    assert_mentions(
        &message(Batcher::from_state(data, state).map(|_| ())),
        &["dataset of 12 images", "has 10"],
    );
}

#[test]
fn batch_uploads_as_an_nchw_tensor() {
    let mut batcher = Batcher::new(counting_dataset(10), 4, 3, true).unwrap();
    let batch = batcher.next_batch();
    let tensor = batch.to_tensor(gpu()).unwrap();
    assert_eq!(tensor.shape(), &[4, 1, 2, 3]);
    assert_eq!(tensor.to_vec().unwrap(), batch.images);
}

#[test]
fn save_grid_writes_a_png_of_the_expected_size() {
    let dir = temp_dir("grid");
    let path = dir.join("nested/samples.png");
    let gray: Vec<f32> = (0..5 * 12).map(|i| i as f32 / 30.0 - 1.0).collect();
    let layout = GridLayout {
        columns: 2,
        padding: 1,
        scale: 2,
    };
    save_grid(&path, &gray, [5, 1, 3, 4], layout).unwrap();
    assert!(!dir.join("nested/samples.png.tmp").exists());
    let read = image::open(&path).unwrap().to_luma8();
    // 2 columns of 8 pixels, 3 rows of 6, 1 pixel of padding around each.
    assert_eq!(read.dimensions(), (19, 22));
    assert_eq!(read.get_pixel(0, 0).0, [0]);
    assert_eq!(read.get_pixel(1, 1).0, [0]);
    assert_eq!(read.get_pixel(3, 1).0, [4]);
    assert_eq!(
        read.get_pixel(10, 1).0[0],
        ((12.0 / 30.0) * 127.5f32).round() as u8
    );
    let rgb: Vec<f32> = [1.0, -1.0, 3.0].iter().flat_map(|&v| [v; 4]).collect();
    let picture = grid_image(&rgb, [1, 3, 2, 2], GridLayout::default())
        .unwrap()
        .to_rgb8();
    assert_eq!(
        (picture.dimensions(), picture.get_pixel(2, 2).0),
        ((6, 6), [255, 0, 255])
    );
    assert_mentions(
        &message(grid_image(&rgb, [1, 2, 2, 3], layout)),
        &["1 (grayscale) or 3 (RGB)"],
    );
    std::fs::write(dir.join("file"), "").unwrap();
    assert_mentions(
        &message(save_grid(dir.join("file/x.png"), &gray, [5, 1, 3, 4], layout)),
        &["file/x.png"],
    );
}
