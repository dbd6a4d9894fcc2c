//! An image classifier trained with cross-entropy (`wgdiff train-classifier`); its penultimate
//! layer gives the features of MNIST-FID, a Fréchet distance for 28x28 grey images.

mod eval;
mod mnist_fid;
mod net;
pub mod train;

pub use eval::{argmax, gaussian_noise_images, FidChecks, EVAL_BATCH};
pub use mnist_fid::{mnist_fid_label, MnistFid, SHIPPED_MNIST_TEST_STATS};
pub use net::{Classifier, ClassifierConfig, CHECKPOINT_KIND};
pub use train::{ClassifierTrainConfig, ClassifierTrainer, EpochRecord, StepStats};

/// Where `wgdiff train-classifier --eval` and the tests find the shipped MNIST classifier.
pub const SHIPPED_MNIST_CLASSIFIER: &str = "assets/models/mnist-classifier.safetensors";
/// [channels, height, width] of the images MNIST-FID scores.
pub const MNIST_IMAGE_SHAPE: [usize; 3] = [1, 28, 28];
