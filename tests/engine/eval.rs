//! Evaluation plumbing on real MNIST with a stand-in feature network (4x4 average-pooled
//! pixels): reference statistics, their cache, and FID/KID of generated feature rows.

use crate::common::gpu;
use wgdiff::data::{mnist, Split, DEFAULT_MNIST_DIR};
use wgdiff::eval::{collect_features, compare, FeatureNet, Reference, ReferenceImages};
use wgdiff::{Result, Tensor};

/// Features = 7x7 average-pooled pixels (49 per image): cheap, and they tell digits from noise.
pub(crate) struct PooledPixels;

impl FeatureNet for PooledPixels {
    fn id(&self) -> String {
        "pooled-pixels".into()
    }
    fn metric(&self) -> &'static str {
        "pooled-FID"
    }
    fn features(&self, images: &Tensor) -> Result<Tensor> {
        let n = images.shape()[0];
        images.avg_pool2d(4, 4)?.reshape(&[n, 49])
    }
}

/// An FID tracker on [`PooledPixels`] against the first 100 MNIST test images: the cheap
/// scoring the experiments' toy-size tests train against.
pub(crate) fn pooled_pixel_tracker() -> wgdiff::train::FidTracker {
    let test = mnist(DEFAULT_MNIST_DIR, Split::Test).unwrap();
    let images = ReferenceImages {
        data: &test,
        split: Split::Test,
        limit: Some(100),
    };
    wgdiff::train::FidTracker {
        features: Box::new(PooledPixels),
        reference: pollster::block_on(Reference::compute(gpu(), &PooledPixels, images, 100, |_| {})).unwrap(),
    }
}

#[test]
fn references_are_cached_and_scores_separate_digits_from_noise() {
    let gpu = gpu();
    let test = mnist(DEFAULT_MNIST_DIR, Split::Test).unwrap();
    let dir = std::env::temp_dir().join(format!("wgdiff-eval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let images = ReferenceImages {
        data: &test,
        split: Split::Test,
        limit: Some(1000),
    };
    let mut seen = 0;
    let (reference, from_cache) =
        pollster::block_on(Reference::cached(&dir, gpu, &PooledPixels, images, 256, |done| {
            seen = done
        }))
        .unwrap();
    assert!(!from_cache);
    assert_eq!(
        (seen, reference.source.images, reference.stats.count),
        (1000, 1000, 1000)
    );
    let (again, from_cache) =
        pollster::block_on(Reference::cached(&dir, gpu, &PooledPixels, images, 256, |_| {})).unwrap();
    assert!(from_cache, "the second call must read the cache");
    assert_eq!(again.stats, reference.stats);
    assert_eq!(again.kid_rows, reference.kid_rows);
    // Another image count is another reference.
    let other = ReferenceImages {
        limit: Some(500),
        ..images
    };
    let (_, from_cache) =
        pollster::block_on(Reference::cached(&dir, gpu, &PooledPixels, other, 256, |_| {})).unwrap();
    assert!(!from_cache);

    // Images 1000..1500 of the same split are close to the reference; uniform noise is far.
    let pixels = |start: usize, len: usize| {
        let n = test.image_len();
        Tensor::from_slice(
            gpu,
            &[len, 1, 28, 28],
            &test.images[start * n..(start + len) * n],
            wgdiff::DType::F32,
        )
    };
    let (rows, dim) = pollster::block_on(collect_features(
        &PooledPixels,
        500,
        128,
        |s, l| pixels(1000 + s, l),
        |_| {},
    ))
    .unwrap();
    let close = compare("pooled-FID", &rows, dim, &reference).unwrap();
    let noise: Vec<f32> = (0..500 * 784)
        .map(|i| ((i * 7919 % 2000) as f32 / 1000.0) - 1.0)
        .collect();
    let (noise_rows, _) = pollster::block_on(collect_features(
        &PooledPixels,
        500,
        128,
        |s, l| {
            Tensor::from_slice(
                gpu,
                &[l, 1, 28, 28],
                &noise[s * 784..(s + l) * 784],
                wgdiff::DType::F32,
            )
        },
        |_| {},
    ))
    .unwrap();
    let far = compare("pooled-FID", &noise_rows, dim, &reference).unwrap();
    assert_eq!((close.samples, close.reference_images), (500, 1000));
    assert!(
        far.fid > 20.0 * close.fid && far.kid.unwrap().0 > 20.0 * close.kid.unwrap().0.abs().max(1e-4),
        "digits {close:?} vs noise {far:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
