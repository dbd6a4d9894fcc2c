//! Training the classifier: shuffled batches with random shifts -> cross-entropy -> Adam
//! (warm-up + cosine decay); test accuracy after every epoch; weights-only checkpoints.

use super::{Classifier, ClassifierConfig, EVAL_BATCH};
use crate::data::{Batcher, DataSource, Dataset, Split};
use crate::optim::{Adam, AdamConfig, LrSchedule};
use crate::{Error, Gpu, Result};
use rand::{Rng as _, SeedableRng};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A classifier training run's settings (stored in the checkpoint's metadata).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassifierTrainConfig {
    /// Dataset: `mnist` (assets/mnist), `mnist:DIR` or `fashion:DIR`.
    pub data: String,
    pub model: ClassifierConfig,
    /// Passes over the training split.
    pub epochs: usize,
    /// Images per step.
    pub batch: usize,
    /// Peak Adam learning rate (after warm-up; cosine decay to 1% of it at the last step).
    pub lr: f32,
    /// Linear warm-up steps.
    pub warmup: u32,
    /// Decoupled (AdamW) weight decay.
    pub weight_decay: f32,
    /// Largest random shift of a training image, in pixels (each axis; 0 = no augmentation).
    pub shift: usize,
    /// Seed of the weights, the batch order and the shifts.
    pub seed: u64,
}

impl Default for ClassifierTrainConfig {
    fn default() -> Self {
        ClassifierTrainConfig {
            data: "mnist".into(),
            model: ClassifierConfig::default(),
            epochs: 3,
            batch: 128,
            lr: 2e-3,
            warmup: 100,
            weight_decay: 0.0,
            shift: 2,
            seed: 0,
        }
    }
}

/// What one training step measured.
#[derive(Clone, Copy, Debug)]
pub struct StepStats {
    pub loss: f32,
    /// Images of the batch the network classified correctly (before the update).
    pub correct: usize,
    pub batch: usize,
}

/// The test accuracy after one epoch.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EpochRecord {
    pub epoch: usize,
    pub step: usize,
    pub test_accuracy: f64,
    pub train_seconds: f64,
}

/// A classifier training run in progress.
pub struct ClassifierTrainer {
    pub config: ClassifierTrainConfig,
    pub net: Classifier,
    adam: Adam,
    batcher: Batcher,
    test: Dataset,
    /// Optimiser steps taken.
    pub step: usize,
    /// Seconds spent in `step` so far.
    pub train_seconds: f64,
    pub epochs: Vec<EpochRecord>,
}

impl ClassifierTrainer {
    /// Loads the training and test splits and builds the network from `config.seed`.
    pub fn new(gpu: &Gpu, config: ClassifierTrainConfig) -> Result<ClassifierTrainer> {
        if config.epochs == 0 || config.batch == 0 {
            return Err(Error::Config("epochs and batch must be at least 1".into()));
        }
        if !(config.lr > 0.0 && config.lr.is_finite()) {
            return Err(Error::Config(format!(
                "lr must be a positive number, got {}",
                config.lr
            )));
        }
        let source: DataSource = config.data.parse()?;
        let train = Arc::new(source.load(Split::Train)?);
        let test = source.load(Split::Test)?;
        let m = &config.model;
        if [train.channels, train.height, train.width] != [m.in_channels, m.size, m.size]
            || train.classes != m.classes
        {
            return Err(Error::Config(format!(
                "the data {} has {}x{}x{} images in {} classes but the classifier takes {}x{}x{} in {}; \
                 use a 28x28 grey dataset (mnist, fashion) or change the classifier config",
                train.name,
                train.channels,
                train.height,
                train.width,
                train.classes,
                m.in_channels,
                m.size,
                m.size,
                m.classes
            )));
        }
        let batcher = Batcher::new(train, config.batch, config.seed, false)?;
        let net = Classifier::new(gpu, m.clone(), config.seed)?;
        let total = (config.epochs * batcher.batches_per_epoch()) as u32;
        let adam = Adam::new(
            net.named_params().into_iter().map(|(_, t)| t).collect(),
            AdamConfig {
                lr: config.lr,
                weight_decay: config.weight_decay,
                schedule: LrSchedule::WarmupCosine {
                    warmup: config.warmup.min(total / 2),
                    total,
                    min_factor: 0.01,
                },
                ..AdamConfig::default()
            },
        )?;
        Ok(ClassifierTrainer {
            config,
            net,
            adam,
            batcher,
            test,
            step: 0,
            train_seconds: 0.0,
            epochs: Vec::new(),
        })
    }

    /// Optimiser steps per epoch (full batches).
    pub fn steps_per_epoch(&self) -> usize {
        self.batcher.batches_per_epoch()
    }

    /// Steps of the whole run.
    pub fn total_steps(&self) -> usize {
        self.config.epochs * self.steps_per_epoch()
    }

    /// True once every epoch is done.
    pub fn finished(&self) -> bool {
        self.step >= self.total_steps()
    }

    pub fn train_data(&self) -> &Dataset {
        self.batcher.dataset()
    }

    pub fn test_data(&self) -> &Dataset {
        &self.test
    }

    /// The learning rate the next step uses.
    pub fn current_lr(&self) -> f32 {
        self.adam.current_lr()
    }

    /// One optimiser step on the next (shifted) batch. A non-finite loss stops the run.
    pub fn step(&mut self) -> Result<StepStats> {
        let started = std::time::Instant::now();
        let mut batch = self.batcher.next_batch();
        let seed = crate::ops::random::step_seed(self.config.seed, self.step, 3);
        random_shift(&mut batch.images, batch.shape, self.config.shift, seed);
        let x = batch.to_tensor(self.net.gpu())?;
        let logits = self.net.logits(&x)?;
        let loss = logits.cross_entropy(&batch.labels)?;
        crate::backward(&loss)?;
        self.adam.step()?;
        self.adam.zero_grad();
        let value = loss.item()?;
        if !value.is_finite() {
            return Err(Error::Training(format!(
                "the classifier's loss became {value} at step {}; lower --lr (now {})",
                self.step + 1,
                self.config.lr
            )));
        }
        let classes = self.net.config.classes;
        let correct = logits
            .to_vec()?
            .chunks(classes)
            .zip(&batch.labels)
            .filter(|(row, &l)| super::argmax(row) == l)
            .count();
        self.step += 1;
        self.train_seconds += started.elapsed().as_secs_f64();
        Ok(StepStats {
            loss: value,
            correct,
            batch: batch.labels.len(),
        })
    }

    /// Accuracy on the whole test split; recorded as the end of the current epoch.
    pub fn evaluate(&mut self) -> Result<f64> {
        let accuracy = self.net.accuracy(&self.test, None, EVAL_BATCH)?;
        self.epochs.push(EpochRecord {
            epoch: self.step.div_ceil(self.steps_per_epoch()),
            step: self.step,
            test_accuracy: accuracy,
            train_seconds: self.train_seconds,
        });
        Ok(accuracy)
    }

    /// The checkpoint metadata's `training` document: settings, steps, time, the accuracy of
    /// every evaluation (the last is `test_accuracy`), `extra` fields and the command.
    pub fn record(&self, command: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut doc = serde_json::json!({
            "config": self.config,
            "steps": self.step,
            "images_seen": self.step * self.config.batch,
            "train_seconds": self.train_seconds,
            "test_images": self.test.len(),
            "test_accuracy": self.epochs.last().map(|e| e.test_accuracy),
            "epochs": self.epochs,
            "command": command,
        });
        if let (Some(doc), serde_json::Value::Object(extra)) = (doc.as_object_mut(), extra) {
            doc.extend(extra);
        }
        doc
    }
}

/// Moves every image of a batch [B, C, H, W] by its own random offset in -max..=max pixels
/// along each axis (drawn from `seed`), filling the uncovered border with -1 (black).
pub fn random_shift(images: &mut [f32], [b, c, h, w]: [usize; 4], max: usize, seed: u64) {
    if max == 0 {
        return;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let m = max as i64;
    let plane = h * w;
    let mut moved = vec![0.0f32; plane];
    for image in images.chunks_exact_mut(c * plane).take(b) {
        let (dy, dx) = (
            rng.random_range(-m..=m) as isize,
            rng.random_range(-m..=m) as isize,
        );
        if (dy, dx) == (0, 0) {
            continue;
        }
        for channel in image.chunks_exact_mut(plane) {
            for y in 0..h as isize {
                for x in 0..w as isize {
                    let (sy, sx) = (y - dy, x - dx);
                    let inside = (0..h as isize).contains(&sy) && (0..w as isize).contains(&sx);
                    moved[(y * w as isize + x) as usize] = if inside {
                        channel[(sy * w as isize + sx) as usize]
                    } else {
                        -1.0
                    };
                }
            }
            channel.copy_from_slice(&moved);
        }
    }
}
