//! A folder of PNG/JPEG images as an unlabeled dataset: files sorted by name, converted to
//! grayscale or RGB, resized to one size (or required to share the first image's size).

use super::read::check_host_memory;
use super::Dataset;
use crate::{Error, Result};
use image::imageops::{self, FilterType};
use image::{ImageBuffer, Pixel};
use std::path::{Path, PathBuf};

/// The image files directly in `dir` (not in subfolders), by extension, sorted by name.
fn image_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries =
        crate::fsio::list_dir(dir).map_err(|e| Error::data(dir, format!("cannot list the folder: {e}")))?;
    let mut files = Vec::new();
    for path in entries {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if path.is_file() && matches!(ext.as_deref(), Some("png" | "jpg" | "jpeg")) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Pixels of one image in channel-major order, at `size` (h, w): resized to it, or, when
/// `resize` is false, an error if the image has another size.
fn planar_pixels<P: Pixel<Subpixel = u8> + 'static>(
    img: ImageBuffer<P, Vec<u8>>,
    (h, w): (u32, u32),
    resize: bool,
) -> std::result::Result<Vec<u8>, (u32, u32)> {
    let img = if img.dimensions() == (w, h) {
        img
    } else if resize {
        imageops::resize(&img, w, h, FilterType::Triangle)
    } else {
        return Err((img.height(), img.width()));
    };
    let channels = P::CHANNEL_COUNT as usize;
    let interleaved = img.into_raw();
    Ok((0..channels)
        .flat_map(|c| interleaved.iter().skip(c).step_by(channels).copied())
        .collect())
}

/// Every `*.png`, `*.jpg`, `*.jpeg` in `dir` (sorted by name, not recursive) as one unlabeled
/// class, converted to `channels` (1 = grayscale, 3 = RGB) and resized (triangle filter) to
/// `size` = (height, width); with `size` None all images must have the first one's size.
pub fn image_folder(dir: impl AsRef<Path>, size: Option<(u32, u32)>, channels: usize) -> Result<Dataset> {
    let dir = dir.as_ref();
    if channels != 1 && channels != 3 {
        let msg = format!("channels must be 1 (grayscale) or 3 (RGB), got {channels}");
        return Err(Error::data(dir, msg));
    }
    if let Some((h, w)) = size.filter(|&(h, w)| h == 0 || w == 0) {
        return Err(Error::data(
            dir,
            format!("cannot resize images to {h}x{w}; give a size of at least 1x1"),
        ));
    }
    let files = image_files(dir)?;
    if files.is_empty() {
        return Err(Error::data(
            dir,
            "no .png, .jpg or .jpeg images in this folder; put the images there",
        ));
    }
    // Every image has the target size once decoded: refuse a folder that cannot fit up front.
    let check_fits = |(h, w): (u32, u32)| {
        let pixels = files.len() as u64 * channels as u64 * h as u64 * w as u64;
        check_host_memory(
            dir,
            &format!("{} images of {channels}x{h}x{w}", files.len()),
            pixels,
        )
    };
    if let Some(size) = size {
        check_fits(size)?;
    }
    let mut target = size;
    let mut pixels = Vec::new();
    for path in &files {
        let img = image::ImageReader::open(path)
            .and_then(|reader| reader.with_guessed_format())
            .map_err(|e| Error::data(path, format!("cannot read the file: {e}")))?
            .decode()
            .map_err(|e| {
                Error::data(
                    path,
                    format!("cannot decode the image ({e}); replace or remove it"),
                )
            })?;
        let want = match target {
            Some(size) => size,
            None => {
                let first = (img.height(), img.width());
                check_fits(first)?;
                *target.insert(first)
            }
        };
        let planar = match channels {
            1 => planar_pixels(img.to_luma8(), want, size.is_some()),
            _ => planar_pixels(img.to_rgb8(), want, size.is_some()),
        };
        let planar = planar.map_err(|(h, w)| {
            let msg = format!(
                "is {h}x{w} (height x width) but {} is {}x{}; resize the images to one size, or give image_folder a size to resize them to",
                files[0].display(),
                want.0,
                want.1
            );
            Error::data(path, msg)
        })?;
        pixels.extend_from_slice(&planar);
    }
    let (h, w) = target.map_or((0, 0), |(h, w)| (h as usize, w as usize));
    let name = format!("folder/{}", dir.display());
    Dataset::from_pixels(name, &pixels, vec![0; files.len()], [channels, h, w], 1)
}
