//! The cross-entropy op (CPU reference, finite differences, errors) and the MNIST classifier:
//! training steps reduce the loss, checkpoints round-trip bit for bit and reject wrong shapes,
//! and the shipped classifier classifies MNIST and separates digits from noise (MNIST-FID).

use crate::common::*;
use crate::cpu;
use rand::Rng;
use wgdiff::checkpoint::Checkpoint;
use wgdiff::classifier::train::random_shift;
use wgdiff::classifier::{
    gaussian_noise_images, Classifier, ClassifierConfig, ClassifierTrainConfig, ClassifierTrainer,
    SHIPPED_MNIST_CLASSIFIER,
};
use wgdiff::data::{mnist, Split, DEFAULT_MNIST_DIR};
use wgdiff::eval::FeatureNet;
use wgdiff::{DType, Tensor};

fn random_labels(n: usize, classes: usize) -> Vec<u32> {
    let mut r = rng();
    (0..n).map(|_| r.random_range(0..classes as u32)).collect()
}

#[test]
fn cross_entropy_matches_cpu_and_differentiates() {
    for dtype in dtypes() {
        // [1, 2]: the smallest; [70, 10]: more rows than a workgroup; offset 80: exp would
        // overflow f32 without the max subtraction.
        for (rows, classes, offset) in [
            (1, 2, 0.0),
            (5, 10, 0.0),
            (70, 10, 0.0),
            (3, 37, 0.0),
            (6, 10, 80.0),
        ] {
            let x: Vec<f64> = normal_vec(&mut rng(), rows * classes)
                .iter()
                .map(|v| 3.0 * v + offset)
                .collect();
            let labels = random_labels(rows, classes);
            let l = labels.clone();
            check_op(
                &format!("cross_entropy [{rows}, {classes}] + {offset}"),
                dtype,
                &[(vec![rows, classes], x.clone())],
                move |xs| {
                    let per_row = cpu::cross_entropy_rows(&xs[0], classes, &l);
                    vec![per_row.iter().sum::<f64>() / rows as f64]
                },
                |ts| ts[0].cross_entropy(&labels),
            );
            let l = labels.clone();
            check_op(
                &format!("cross_entropy_rows [{rows}, {classes}] + {offset}"),
                dtype,
                &[(vec![rows, classes], x)],
                move |xs| cpu::cross_entropy_rows(&xs[0], classes, &l),
                |ts| ts[0].cross_entropy_rows(&labels),
            );
        }
    }
}

#[test]
fn a_confident_rows_small_loss_keeps_its_relative_precision() {
    // loss = log(1 + exp(-d)) for logits [0, -d] and label 0, down to 3e-7 (d = 15), where
    // 1 + exp(-d) rounds away most of it in f32 and log near 1 may be precise only in absolute
    // terms (the kernel before its series failed at d = 11.6; beyond d ~ 17 lavapipe's gradient
    // drifts by 2e-3 of a 2e-8 value)
    for d in [0.5, 2.0, 4.6, 8.0, 11.6, 13.0, 14.0, 15.0] {
        let x = vec![0.0, -d];
        check_op(
            &format!("cross_entropy_rows of [0, -{d}]"),
            DType::F32,
            &[(vec![1, 2], x)],
            |xs| cpu::cross_entropy_rows(&xs[0], 2, &[0]),
            |ts| ts[0].cross_entropy_rows(&[0]),
        );
    }
}

#[test]
fn cross_entropy_rejects_bad_labels_and_shapes() {
    let x = Tensor::zeros(gpu(), &[3, 4], wgdiff::DType::F32).unwrap();
    let msg = x.cross_entropy(&[0, 4, 1]).unwrap_err().to_string();
    assert!(
        msg.contains("label 1 is 4") && msg.contains("only 4 classes"),
        "{msg}"
    );
    let msg = x.cross_entropy(&[0, 1]).unwrap_err().to_string();
    assert!(msg.contains("2 labels for 3 rows"), "{msg}");
    let msg = x
        .reshape(&[12])
        .unwrap()
        .cross_entropy(&[0])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("[N, classes]"), "{msg}");
}

#[test]
fn random_shift_moves_images_and_fills_black() {
    // One 1x5x5 image with a single bright pixel in the middle, shifted by up to 2 pixels.
    let mut seen = std::collections::HashSet::new();
    for seed in 0..40 {
        let mut image = vec![-1.0f32; 25];
        image[12] = 1.0;
        random_shift(&mut image, [1, 1, 5, 5], 2, seed);
        let bright: Vec<usize> = (0..25).filter(|&i| image[i] == 1.0).collect();
        assert_eq!(bright.len(), 1, "seed {seed}: {image:?}");
        assert!(image.iter().all(|&v| v == 1.0 || v == -1.0));
        seen.insert(bright[0]);
    }
    assert!(seen.len() > 10, "shifts drawn: {seen:?}");
    // An edge pixel shifted off the image leaves only black behind; shifts repeat per seed.
    let mut a = (0..50).map(|i| i as f32 / 50.0).collect::<Vec<_>>();
    let mut b = a.clone();
    random_shift(&mut a, [2, 1, 5, 5], 1, 7);
    random_shift(&mut b, [2, 1, 5, 5], 1, 7);
    assert_eq!(a, b);
}

fn small_config() -> ClassifierConfig {
    ClassifierConfig {
        channels: [8, 8, 16],
        groups: 4,
        features: 32,
        ..ClassifierConfig::default()
    }
}

fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wgdiff-classifier-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn classifier_training_steps_reduce_the_loss_on_mnist() {
    let config = ClassifierTrainConfig {
        model: small_config(),
        epochs: 1,
        batch: 32,
        lr: 3e-3,
        warmup: 0,
        seed: 3,
        ..ClassifierTrainConfig::default()
    };
    let mut trainer = ClassifierTrainer::new(gpu(), config).unwrap();
    let losses: Vec<f32> = (0..16).map(|_| trainer.step().unwrap().loss).collect();
    let first = losses[..4].iter().sum::<f32>() / 4.0;
    let last = losses[12..].iter().sum::<f32>() / 4.0;
    assert!(last < 0.75 * first, "loss did not fall: {losses:?}");
}

#[test]
fn classifier_checkpoint_round_trip_is_bit_exact() {
    let net = Classifier::new(gpu(), small_config(), 5).unwrap();
    let path = temp_path("round.safetensors");
    pollster::block_on(net.save(&path, serde_json::json!({"test_accuracy": 0.5}))).unwrap();
    let back = Classifier::load(gpu(), &path).unwrap();
    assert_eq!(back.config, net.config);
    for ((name, a), (_, b)) in net.named_params().iter().zip(back.named_params()) {
        let a: Vec<u32> = a.to_vec().unwrap().iter().map(|v| v.to_bits()).collect();
        let b: Vec<u32> = b.to_vec().unwrap().iter().map(|v| v.to_bits()).collect();
        assert_eq!(a, b, "{name}");
    }
    let images = uniform_vec(&mut rng(), 3 * 28 * 28, -1.0, 1.0);
    let x = upload(&[3, 1, 28, 28], &images, wgdiff::DType::F32);
    let (la, lb) = (net.logits(&x).unwrap(), back.logits(&x).unwrap());
    assert_eq!(la.to_vec().unwrap(), lb.to_vec().unwrap());
    let meta = Checkpoint::load(&path).unwrap().meta;
    assert_eq!(meta["training"]["test_accuracy"], 0.5);
    assert_eq!(meta["config"]["channels"], serde_json::json!([8, 8, 16]));
}

#[test]
fn wrong_classifier_checkpoints_give_clear_errors() {
    let net = Classifier::new(gpu(), small_config(), 6).unwrap();
    let path = temp_path("wrong.safetensors");
    pollster::block_on(net.save(&path, serde_json::json!({}))).unwrap();
    // The metadata claims a wider last conv than the stored weights have.
    let mut ckpt = Checkpoint::load(&path).unwrap();
    ckpt.meta["config"]["channels"] = serde_json::json!([8, 8, 32]);
    ckpt.save(&path).unwrap();
    let msg = Classifier::load(gpu(), &path).err().unwrap().to_string();
    assert!(
        msg.contains("wrong.safetensors")
            && msg.contains("tensor conv3.weight has shape [16, 8, 3, 3]")
            && msg.contains("[32, 8, 3, 3]"),
        "{msg}"
    );
    // A tensor missing, and a file that is not a classifier checkpoint.
    let mut ckpt = Checkpoint::load(&path).unwrap();
    ckpt.meta["config"]["channels"] = serde_json::json!([8, 8, 16]);
    ckpt.tensors.remove("head.bias");
    let msg = Classifier::from_checkpoint(gpu(), &ckpt, "cut")
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("has no tensor head.bias"), "{msg}");
    ckpt.meta = serde_json::json!({"step": 3});
    let msg = Classifier::from_checkpoint(gpu(), &ckpt, "foreign")
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("not a classifier checkpoint"), "{msg}");
}

#[test]
fn shipped_classifier_classifies_mnist_and_separates_digits_from_noise() {
    let net = Classifier::load(gpu(), std::path::Path::new(SHIPPED_MNIST_CLASSIFIER)).unwrap();
    let test = mnist(DEFAULT_MNIST_DIR, Split::Test).unwrap();
    let accuracy = net.accuracy(&test, Some(200), 100).unwrap();
    assert!(
        accuracy >= 0.97,
        "accuracy on the first 200 test images: {accuracy}"
    );
    // MNIST-FID on 300 images a side: test vs test (other images) is far below test vs noise.
    let per = test.image_len();
    let digits_a = &test.images[..300 * per];
    let digits_b = &test.images[300 * per..600 * per];
    let noise = gaussian_noise_images(300 * per, 1);
    let same = net.mnist_fid(digits_a, digits_b, 150).unwrap();
    let far = net.mnist_fid(digits_a, &noise, 150).unwrap();
    assert!(
        same.is_finite() && far > 10.0 * same,
        "MNIST-FID digits {same}, noise {far}"
    );
    // As `wgdiff::eval`'s feature network: named MNIST-FID, its id fixed by the weights.
    assert_eq!(FeatureNet::metric(&net), "MNIST-FID");
    assert!(net.id().starts_with("classifier-") && !net.id().contains("untrained"));
    let x = Tensor::from_f32(gpu(), &[2, 1, 28, 28], &digits_a[..2 * per]).unwrap();
    assert_eq!(FeatureNet::features(&net, &x).unwrap().shape(), [2, 128]);
}

/// The shipped statistics of the MNIST test split belong to the shipped classifier: 500 test
/// images score close to them, noise far; statistics of another network are refused by name.
#[test]
fn the_shipped_test_statistics_are_the_shipped_classifiers() {
    use wgdiff::classifier::{MnistFid, SHIPPED_MNIST_TEST_STATS};
    use wgdiff::metrics::{frechet_distance, FeatureStats};
    let gpu = gpu();
    let classifier = std::fs::read(SHIPPED_MNIST_CLASSIFIER).unwrap();
    let stats = std::fs::read(SHIPPED_MNIST_TEST_STATS).unwrap();
    let fid = MnistFid::shipped(gpu, &classifier, &stats).unwrap();
    assert_eq!(fid.reference.source.images, 10_000);
    let test = mnist(DEFAULT_MNIST_DIR, Split::Test).unwrap();
    // 450 images in batches of 150, the shapes the test above tunes the kernels for
    let (n, batch) = (450, 150);
    let fid_of = |pixels: Vec<f32>| {
        let mut rows = Vec::new();
        for part in pixels.chunks(batch * 784) {
            let images = Tensor::from_f32(gpu, &[batch, 1, 28, 28], part).unwrap();
            rows.extend(fid.classifier.features(&images).unwrap().to_vec().unwrap());
        }
        let generated = FeatureStats::from_features(&rows, fid.reference.stats.dim()).unwrap();
        frechet_distance(&generated, &fid.reference.stats).unwrap()
    };
    let digits = fid_of(test.images[..n * 784].to_vec());
    let noise = fid_of(gaussian_noise_images(n * 784, 7));
    // (measured with 500 images: 18.9 and 599; a few hundred images bias FID upwards)
    assert!(digits < 40.0 && noise > 200.0, "digits {digits}, noise {noise}");

    let other = Classifier::new(gpu, small_config(), 3).unwrap();
    let other = pollster::block_on(other.checkpoint(serde_json::json!({})))
        .unwrap()
        .to_bytes()
        .unwrap();
    let err = MnistFid::shipped(gpu, &other, &stats).err().unwrap().to_string();
    assert!(
        err.contains(SHIPPED_MNIST_TEST_STATS) && err.contains("README"),
        "{err}"
    );
}
