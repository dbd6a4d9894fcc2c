//! Kernel choice by measurement: the first time a (family, rounded shape) key is seen,
//! every candidate is timed on the device and the fastest is remembered.

use crate::Result;
use std::collections::HashMap;
use std::sync::Mutex;

/// Remembers the measured winner (index and label) for each key.
#[derive(Default)]
pub struct Autotuner {
    choices: Mutex<HashMap<String, (usize, String)>>,
}

impl Autotuner {
    /// The remembered choice for `key`, if any.
    pub fn get(&self, key: &str) -> Option<usize> {
        self.choices.lock().unwrap().get(key).map(|c| c.0)
    }

    /// Forces a choice (used by benchmarks and tests that pin a variant).
    pub fn set(&self, key: &str, choice: usize, label: &str) {
        self.choices
            .lock()
            .unwrap()
            .insert(key.to_string(), (choice, label.to_string()));
    }

    /// All remembered choices as (key, label of the winner), sorted by key.
    pub fn snapshot(&self) -> Vec<(String, String)> {
        let mut v: Vec<_> = self
            .choices
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.1.clone()))
            .collect();
        v.sort();
        v
    }

    /// Index of the fastest candidate (named by `labels`) as timed by `run(i)`;
    /// `fallback` where timing is unavailable (the web). `run` must record work on `gpu`
    /// without reading it back.
    pub fn choose(
        &self,
        gpu: &super::Gpu,
        key: &str,
        labels: &[String],
        fallback: usize,
        run: impl Fn(usize) -> Result<()>,
    ) -> Result<usize> {
        if let Some(c) = self.get(key) {
            return Ok(c);
        }
        let best = if labels.len() == 1 {
            0
        } else {
            measure(gpu, labels.len(), run)?.unwrap_or(fallback)
        };
        self.set(key, best, &labels[best]);
        Ok(best)
    }
}

/// Times every candidate 3 times, round-robin so machine noise hits all alike, after a
/// warm-up run each (which also compiles its pipeline); returns the lowest median.
#[cfg(not(target_arch = "wasm32"))]
fn measure(gpu: &super::Gpu, candidates: usize, run: impl Fn(usize) -> Result<()>) -> Result<Option<usize>> {
    for c in 0..candidates {
        run(c)?;
    }
    gpu.sync()?;
    let mut times = vec![Vec::new(); candidates];
    for _ in 0..3 {
        for (c, t) in times.iter_mut().enumerate() {
            let start = std::time::Instant::now();
            run(c)?;
            gpu.sync()?;
            t.push(start.elapsed().as_secs_f64());
        }
    }
    let medians = times.iter().map(|t| crate::bench::median(t));
    Ok(medians
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c))
}

#[cfg(target_arch = "wasm32")]
fn measure(
    _gpu: &super::Gpu,
    _candidates: usize,
    _run: impl Fn(usize) -> Result<()>,
) -> Result<Option<usize>> {
    Ok(None)
}
