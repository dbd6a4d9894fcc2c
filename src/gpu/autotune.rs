//! Kernel choice by measurement: the first time a (family, rounded shape) key is seen,
//! every candidate is timed on the device and the fastest is remembered (or, in deterministic
//! mode and for new keys inside [`without_measuring`], a fixed rule picks it).

use crate::Result;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Remembers the label of the measured winner for each key, optionally in a JSON file so
/// later runs skip the measurement (native only).
///
/// **Deterministic mode** ([`Autotuner::set_deterministic`], or [`super::Gpu::set_deterministic`]
/// for a device's tuner): every choice is the caller's `fallback` candidate, the fixed rule each
/// family documents (and the choice the browser makes, where nothing may be timed), so two runs
/// with the same adapter, driver and shapes pick the same kernels and give bit-identical results.
/// Nothing is timed, and measured choices (this run's or the cache file's) are neither used nor
/// recorded, so the cache file is not written; pinned choices ([`Autotuner::set`]) still apply.
#[derive(Default)]
pub struct Autotuner {
    choices: Mutex<BTreeMap<String, String>>,
    pinned: Mutex<BTreeMap<String, String>>,
    cache_file: Mutex<Option<PathBuf>>,
    deterministic: AtomicBool,
    on_measure: Mutex<Option<MeasureHook>>,
    /// Seconds spent timing candidates so far ([`Autotuner::seconds_measuring`]).
    measuring: Mutex<f64>,
}

/// Told the key of every measurement before it starts (see [`Autotuner::on_measure`]).
type MeasureHook = Box<dyn Fn(&str) + Send + Sync>;

thread_local! {
    static MEASURING_OFF_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with nothing measured by the kernel choices made on this thread, on any device: a
/// shape whose choice is pinned or remembered (this run's, or the cache file's) takes it, any
/// other its family's fixed rule, unrecorded, so a later measuring run still times it. For
/// work too short to repay the timing: a fresh CPU adapter compiles every candidate first
/// (a checkpoint's load-time probe; `wgdiff sample` without `--tune`, where tuning the shipped
/// U-Net cost 35 s on Mesa 22.3 and ~170 s on Mesa 25 for ~1 s a run saved).
pub fn without_measuring<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            MEASURING_OFF_HERE.set(self.0);
        }
    }
    let _restore = Restore(MEASURING_OFF_HERE.replace(true));
    f()
}

/// [`without_measuring`] for async work: `work` is polled inside it, on whichever thread
/// polls it (the app's sampling jobs).
pub async fn without_measuring_async<T>(work: impl std::future::Future<Output = T>) -> T {
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(|cx| without_measuring(|| work.as_mut().poll(cx))).await
}

impl Autotuner {
    /// The label `map` holds for `key` if it is one of `labels`.
    fn lookup(map: &Mutex<BTreeMap<String, String>>, key: &str, labels: &[String]) -> Option<usize> {
        let map = map.lock().unwrap();
        let label = map.get(key)?;
        labels.iter().position(|l| l == label)
    }

    /// Pins a choice (benchmarks and tests that force a variant): it wins over measured and
    /// cached choices, applies in deterministic mode too, and is not saved to the cache file.
    pub fn set(&self, key: &str, label: &str) {
        self.pinned
            .lock()
            .unwrap()
            .insert(key.to_string(), label.to_string());
    }

    /// Deterministic mode on or off (see [`Autotuner`]): while on, [`Autotuner::choose`]
    /// returns its `fallback` (or a pinned choice) without timing anything or touching the
    /// remembered choices and the cache file. Turning it off restores measurement.
    pub fn set_deterministic(&self, on: bool) {
        self.deterministic.store(on, Ordering::Relaxed);
    }

    /// True in deterministic mode.
    pub fn is_deterministic(&self) -> bool {
        self.deterministic.load(Ordering::Relaxed)
    }

    /// All remembered choices (measured, loaded from the cache file, or pinned) as (key,
    /// label of the winner), sorted by key; a pin replaces a measured choice of its key.
    pub fn snapshot(&self) -> Vec<(String, String)> {
        let mut all = self.choices.lock().unwrap().clone();
        all.extend(self.pinned.lock().unwrap().clone());
        all.into_iter().collect()
    }

    /// Calls `hook` with the key of every measurement before it starts: the first run of a
    /// model on a device measures kernel variants for each new shape, minutes on a CPU
    /// adapter, which a shell should announce rather than sit silent through.
    pub fn on_measure(&self, hook: impl Fn(&str) + Send + Sync + 'static) {
        *self.on_measure.lock().unwrap() = Some(Box::new(hook));
    }

    /// Seconds this tuner has spent timing candidates: a training run keeps them out of its
    /// training time and `max_minutes` budget (a fresh CPU adapter measures for minutes at
    /// its first steps, once per machine).
    pub fn seconds_measuring(&self) -> f64 {
        *self.measuring.lock().unwrap()
    }

    /// Loads earlier choices from `path` (a missing or unreadable file starts empty) and
    /// saves every new measured choice there (written to a temporary file, then renamed).
    /// In deterministic mode the loaded choices are not used and nothing is saved.
    pub fn use_cache_file(&self, path: PathBuf) {
        if let Ok(text) = crate::fsio::read(&path) {
            if let Ok(saved) = serde_json::from_slice::<BTreeMap<String, String>>(&text) {
                self.choices.lock().unwrap().extend(saved);
            }
        }
        *self.cache_file.lock().unwrap() = Some(path);
    }

    /// Writes every choice to the cache file, holding its lock (one writer per process at a
    /// time) and through a temporary of this process's own (several wgdiff processes may tune
    /// at once: a shared temporary name let one rename away the file another was writing).
    fn save(&self) -> Result<()> {
        let cache_file = self.cache_file.lock().unwrap();
        let Some(path) = cache_file.as_ref() else {
            return Ok(());
        };
        let text = serde_json::to_string_pretty(&*self.choices.lock().unwrap()).expect("map serialises");
        crate::fsio::write_atomic(path, text.as_bytes())
    }

    /// Index of the fastest candidate (named by `labels`) as timed by `run(i)`, measured
    /// the first time `key` is seen; `fallback` where timing is unavailable (the web) and in
    /// deterministic mode. A pinned choice ([`Autotuner::set`]) wins in both modes.
    /// `run` must record work on `gpu` without reading it back.
    pub fn choose(
        &self,
        gpu: &super::Gpu,
        key: &str,
        labels: &[String],
        fallback: usize,
        run: impl Fn(usize) -> Result<()>,
    ) -> Result<usize> {
        if let Some(c) = Self::lookup(&self.pinned, key, labels) {
            return Ok(c);
        }
        if self.is_deterministic() {
            return Ok(fallback);
        }
        if let Some(c) = Self::lookup(&self.choices, key, labels) {
            return Ok(c);
        }
        if MEASURING_OFF_HERE.get() {
            return Ok(fallback);
        }
        let best = if labels.len() == 1 {
            0
        } else {
            if let Some(hook) = self.on_measure.lock().unwrap().as_ref() {
                hook(key);
            }
            let started = web_time::Instant::now();
            let measured = super::host::measure(gpu, labels.len(), run);
            *self.measuring.lock().unwrap() += started.elapsed().as_secs_f64();
            measured?.unwrap_or(fallback)
        };
        self.choices
            .lock()
            .unwrap()
            .insert(key.to_string(), labels[best].clone());
        self.save()?;
        Ok(best)
    }
}
