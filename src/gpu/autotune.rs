//! Kernel choice by measurement: the first time a (family, rounded shape) key is seen,
//! every candidate is timed on the device and the fastest is remembered.

use crate::Result;
use std::collections::HashMap;
use std::sync::Mutex;

/// Remembers the measured winner for each key.
#[derive(Default)]
pub struct Autotuner {
    choices: Mutex<HashMap<String, usize>>,
}

impl Autotuner {
    /// The remembered choice for `key`, if any.
    pub fn get(&self, key: &str) -> Option<usize> {
        self.choices.lock().unwrap().get(key).copied()
    }

    /// Forces a choice (used by benchmarks and tests that pin a variant).
    pub fn set(&self, key: &str, choice: usize) {
        self.choices.lock().unwrap().insert(key.to_string(), choice);
    }

    /// All remembered choices, sorted by key.
    pub fn snapshot(&self) -> Vec<(String, usize)> {
        let mut v: Vec<_> = self.choices.lock().unwrap().iter().map(|(k, v)| (k.clone(), *v)).collect();
        v.sort();
        v
    }

    /// Index of the fastest of `candidates` runs of `run(i)`; `fallback` where timing is
    /// unavailable (the web). `run` must record work on `gpu` without reading it back.
    pub fn choose(
        &self,
        gpu: &super::Gpu,
        key: &str,
        candidates: usize,
        fallback: usize,
        run: impl Fn(usize) -> Result<()>,
    ) -> Result<usize> {
        if let Some(c) = self.get(key) {
            return Ok(c);
        }
        let best = measure(gpu, candidates, run)?.unwrap_or(fallback);
        self.set(key, best);
        Ok(best)
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn measure(gpu: &super::Gpu, candidates: usize, run: impl Fn(usize) -> Result<()>) -> Result<Option<usize>> {
    let mut best = (f64::INFINITY, 0);
    for c in 0..candidates {
        run(c)?; // warm-up: compiles the pipeline
        gpu.sync()?;
        let mut times = Vec::new();
        for _ in 0..3 {
            let t = std::time::Instant::now();
            run(c)?;
            gpu.sync()?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        if times[1] < best.0 {
            best = (times[1], c);
        }
    }
    Ok(Some(best.1))
}

#[cfg(target_arch = "wasm32")]
fn measure(_gpu: &super::Gpu, _candidates: usize, _run: impl Fn(usize) -> Result<()>) -> Result<Option<usize>> {
    Ok(None)
}
