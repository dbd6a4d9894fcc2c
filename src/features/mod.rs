//! Feature networks for the sample-quality metrics (FID, KID, Inception Score): they map images
//! to the feature vectors and class logits that `crate::metrics` consumes.

mod inception;

pub use inception::{InceptionV3, CONVERT_COMMAND, INCEPTION_FEATURES, INCEPTION_INPUT, INCEPTION_LOGITS};
