//! One entry to every experiment for the CLI and the app: which one and how much ([`Setup`]),
//! run with its progress, table rows and plot points as [`Event`]s, its report files written.

use super::adaptive_skip::{self, skip_model_path, SkipModel, SKIP_MODELS};
use super::report::{ModelInfo, BASELINE_LABEL};
use super::{compression, ladder, ladder_report, skip_search, skip_search_report, speedrun};
use super::{step_search, step_search_report};
use super::{ExperimentPlan, ExperimentReport, Header, Inputs, ReportFile};
use crate::classifier::{
    mnist_fid_label, MnistFid, MNIST_IMAGE_SHAPE, SHIPPED_MNIST_CLASSIFIER, SHIPPED_MNIST_TEST_STATS,
};
use crate::eval::DEFAULT_STATS_CACHE;
use crate::models::SkipType;
use crate::{Error, Gpu, Result};
use std::path::{Path, PathBuf};
use web_time::Instant;

/// The model the experiments sample by default: the shipped one, in a page too.
const DEFAULT_MODEL: &str = crate::pipeline::DEFAULT_CHECKPOINT;

/// The experiments, in the order the app lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AdaptiveSkip,
    Compression,
    Ladder,
    SkipSearch,
    Speedrun,
    StepSearch,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::AdaptiveSkip,
        Kind::Compression,
        Kind::Ladder,
        Kind::SkipSearch,
        Kind::Speedrun,
        Kind::StepSearch,
    ];

    /// The subcommand's name: `wgdiff experiment <name>`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::AdaptiveSkip => "adaptive-skip",
            Kind::Compression => "compression",
            Kind::Ladder => "ladder",
            Kind::SkipSearch => "skip-search",
            Kind::Speedrun => "speedrun",
            Kind::StepSearch => "step-search",
        }
    }

    /// What it reproduces, in a line.
    pub fn about(self) -> &'static str {
        match self {
            Kind::AdaptiveSkip => {
                "the adaptive U-Net paper (Giladi, Meir, Kavar, Elad), Tables 1-3: MNIST-FID and speed-up per skip \
                 type and exponent c"
            }
            Kind::Compression => {
                "the UMass MNIST report's compression tables: pruning and int8/int4 weights with size, ms per \
                 image and MNIST-FID"
            }
            Kind::Ladder => {
                "the speed ladders of the CUDA optimisations study (ConvNeXt step per rung) and the NYU \
                 performance-preserving training study (one switch per row)"
            }
            Kind::SkipSearch => {
                "per-step skip schedules searched under MNIST-FID budgets, and deep-feature caching, against \
                 the k(t) family"
            }
            Kind::Speedrun => "MNIST-FID against training time for the candidate recipes behind `wgdiff train`'s default",
            Kind::StepSearch => {
                "few-step timestep schedules searched against a many-step run (after \"Align Your Steps\", Sabour, \
                 Fidler and Kreis): each spacing's time and MNIST-FID beside 50-step DDPM"
            }
        }
    }

    /// The experiment of `name` (`wgdiff experiment <name>`).
    pub fn parse(name: &str) -> Result<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
            Error::Config(format!(
                "no experiment {name:?}: the experiments are {}",
                names.join(", ")
            ))
        })
    }
}

/// The adaptive-skip experiment's models and plan.
#[derive(Clone, Debug)]
pub struct AdaptiveSkipSetup {
    pub plan: adaptive_skip::Plan,
    /// The model trained without skipping (Table 1's first row).
    pub baseline: PathBuf,
    /// Folder of the skip-trained models; a missing one is fine-tuned from the baseline there.
    pub models: PathBuf,
    /// Fine-tuning steps of a missing skip-trained model.
    pub train_steps: usize,
    pub classifier: PathBuf,
    pub cache: PathBuf,
}

/// The compression experiment's models and plan.
#[derive(Clone, Debug)]
pub struct CompressionSetup {
    pub plan: compression::Plan,
    pub unet: PathBuf,
    pub scorenet: PathBuf,
}

/// The skip-search experiment's model and plan.
#[derive(Clone, Debug)]
pub struct SkipSearchSetup {
    pub plan: skip_search::Plan,
    pub model: PathBuf,
    pub classifier: PathBuf,
    pub cache: PathBuf,
}

/// The step search's model and plan.
#[derive(Clone, Debug)]
pub struct StepSearchSetup {
    pub plan: step_search::Plan,
    pub model: PathBuf,
    pub classifier: PathBuf,
    pub cache: PathBuf,
}

/// Which experiment, how much of it, and where its report goes.
#[derive(Clone, Debug)]
pub enum Plan {
    AdaptiveSkip(AdaptiveSkipSetup),
    Compression(CompressionSetup),
    Ladder(ladder::Plan),
    SkipSearch(SkipSearchSetup),
    Speedrun(speedrun::Plan),
    StepSearch(StepSearchSetup),
}

/// An experiment to run: its plan, the folder its report goes to, and the flags that would make
/// `wgdiff experiment` run the same (the report's command line when the app starts it).
#[derive(Clone, Debug)]
pub struct Setup {
    pub plan: Plan,
    pub out: PathBuf,
    flags: Vec<String>,
}

impl Setup {
    /// `kind`'s quick plan (`--quick`, sized for lavapipe) or its full one, with the CLI's
    /// default models and output folder.
    pub fn new(kind: Kind, quick: bool) -> Setup {
        let plan = match kind {
            Kind::AdaptiveSkip => Plan::AdaptiveSkip(AdaptiveSkipSetup {
                plan: adaptive_skip::Plan::choose(quick),
                baseline: DEFAULT_MODEL.into(),
                models: match quick {
                    true => "assets/models".into(),
                    false => "runs/adaptive-skip/models".into(),
                },
                train_steps: if quick { 300 } else { 3000 },
                classifier: SHIPPED_MNIST_CLASSIFIER.into(),
                cache: DEFAULT_STATS_CACHE.into(),
            }),
            Kind::Compression => Plan::Compression(CompressionSetup {
                plan: compression::Plan::choose(quick),
                unet: DEFAULT_MODEL.into(),
                scorenet: compression::SHIPPED_SCORENET.into(),
            }),
            Kind::Ladder => Plan::Ladder(ladder::Plan::choose(quick)),
            Kind::SkipSearch => Plan::SkipSearch(SkipSearchSetup {
                plan: skip_search::Plan::choose(quick),
                model: skip_search::DEFAULT_SEARCH_MODEL.into(),
                classifier: SHIPPED_MNIST_CLASSIFIER.into(),
                cache: DEFAULT_STATS_CACHE.into(),
            }),
            Kind::Speedrun => Plan::Speedrun(speedrun::Plan::choose(quick)),
            Kind::StepSearch => Plan::StepSearch(StepSearchSetup {
                plan: step_search::Plan::choose(quick),
                model: DEFAULT_MODEL.into(),
                classifier: SHIPPED_MNIST_CLASSIFIER.into(),
                cache: DEFAULT_STATS_CACHE.into(),
            }),
        };
        Setup {
            plan,
            out: PathBuf::from("runs").join(kind.name()),
            flags: if quick { vec!["--quick".into()] } else { Vec::new() },
        }
    }

    pub fn kind(&self) -> Kind {
        match self.plan {
            Plan::AdaptiveSkip(_) => Kind::AdaptiveSkip,
            Plan::Compression(_) => Kind::Compression,
            Plan::Ladder(_) => Kind::Ladder,
            Plan::SkipSearch(_) => Kind::SkipSearch,
            Plan::Speedrun(_) => Kind::Speedrun,
            Plan::StepSearch(_) => Kind::StepSearch,
        }
    }

    /// The flags [`set`](Self::set) takes for this experiment: `wgdiff experiment <name>`'s own.
    pub fn keys(&self) -> &'static [&'static str] {
        match self.plan {
            Plan::AdaptiveSkip(_) => &[
                "samples",
                "batch",
                "steps",
                "seed",
                "train-steps",
                "baseline",
                "models",
                "classifier",
                "cache",
                "out",
            ],
            Plan::Compression(_) => &["samples", "steps", "unet", "scorenet", "out"],
            Plan::Ladder(_) => &["ladder-batch", "reps", "train-seconds", "out"],
            Plan::SkipSearch(_) => &[
                "samples",
                "batch",
                "steps",
                "seed",
                "budget",
                "sampler",
                "confirmations",
                "model",
                "classifier",
                "cache",
                "out",
            ],
            Plan::Speedrun(_) => &["recipes", "budget", "out"],
            Plan::StepSearch(_) => &[
                "samples",
                "batch",
                "steps",
                "sampler",
                "reference-steps",
                "probe-images",
                "sweeps",
                "baseline-steps",
                "seed",
                "model",
                "classifier",
                "cache",
                "out",
            ],
        }
    }

    /// Sets the flag `key` (as `wgdiff experiment <name> --<key> <value>` would); refuses a key
    /// the experiment does not have or a value it cannot use, by name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let kind = self.kind().name();
        let bad = |what: &str| Error::Config(format!("experiment {kind}: --{key} {value:?} is not {what}"));
        let count = || value.parse::<usize>().map_err(|_| bad("a whole number"));
        let seconds = || match value.parse::<f64>() {
            Ok(s) if s > 0.0 && s.is_finite() => Ok(s),
            _ => Err(bad("a positive number of seconds")),
        };
        let seed = || value.parse::<u64>().map_err(|_| bad("a seed (a whole number)"));
        let path = || PathBuf::from(value);
        match (&mut self.plan, key) {
            (_, "out") => self.out = path(),
            (Plan::AdaptiveSkip(s), "samples") => s.plan.samples = count()?,
            (Plan::AdaptiveSkip(s), "batch") => s.plan.batch = count()?,
            (Plan::AdaptiveSkip(s), "steps") => s.plan.steps = count()?,
            (Plan::AdaptiveSkip(s), "seed") => s.plan.seed = seed()?,
            (Plan::AdaptiveSkip(s), "train-steps") => s.train_steps = count()?,
            (Plan::AdaptiveSkip(s), "baseline") => s.baseline = path(),
            (Plan::AdaptiveSkip(s), "models") => s.models = path(),
            (Plan::AdaptiveSkip(s), "classifier") => s.classifier = path(),
            (Plan::AdaptiveSkip(s), "cache") => s.cache = path(),
            (Plan::SkipSearch(s), "classifier") => s.classifier = path(),
            (Plan::SkipSearch(s), "cache") => s.cache = path(),
            (Plan::Compression(s), "samples") => s.plan.samples = count()?,
            (Plan::Compression(s), "steps") => s.plan.steps = count()?,
            (Plan::Compression(s), "unet") => s.unet = path(),
            (Plan::Compression(s), "scorenet") => s.scorenet = path(),
            (Plan::Ladder(p), "ladder-batch") => p.ladder_batch = count()?,
            (Plan::Ladder(p), "train-seconds") => p.train_seconds = seconds()?,
            (Plan::Ladder(p), "reps") => p.ladder_reps = count()?,
            (Plan::SkipSearch(s), "samples") => s.plan.samples = count()?,
            (Plan::SkipSearch(s), "batch") => s.plan.batch = count()?,
            (Plan::SkipSearch(s), "steps") => s.plan.steps = count()?,
            (Plan::SkipSearch(s), "seed") => s.plan.seed = seed()?,
            (Plan::SkipSearch(s), "confirmations") => s.plan.confirmations = count()?,
            (Plan::SkipSearch(s), "sampler") => s.plan.sampler = value.parse()?,
            (Plan::SkipSearch(s), "model") => s.model = path(),
            (Plan::SkipSearch(s), "budget") => {
                s.plan.budgets = value
                    .split(',')
                    .map(|b| {
                        b.trim()
                            .parse::<f64>()
                            .map_err(|_| bad("comma-separated MNIST-FID budgets"))
                    })
                    .collect::<Result<_>>()?
            }
            (Plan::Speedrun(p), "budget") => p.budget_seconds = seconds()?,
            (Plan::Speedrun(p), "recipes") => {
                // (empty: every recipe)
                p.recipes = value
                    .split(',')
                    .map(|k| k.trim().to_string())
                    .filter(|k| !k.is_empty())
                    .collect();
                speedrun::choose_recipes(&p.recipes)?;
            }
            (Plan::StepSearch(s), "samples") => s.plan.samples = count()?,
            (Plan::StepSearch(s), "batch") => s.plan.batch = count()?,
            (Plan::StepSearch(s), "steps") => {
                s.plan.steps = value
                    .split(',')
                    .map(|n| {
                        n.trim()
                            .parse::<usize>()
                            .map_err(|_| bad("comma-separated step counts"))
                    })
                    .collect::<Result<_>>()?
            }
            (Plan::StepSearch(s), "sampler") => s.plan.sampler = value.parse()?,
            (Plan::StepSearch(s), "reference-steps") => s.plan.reference_steps = count()?,
            (Plan::StepSearch(s), "probe-images") => s.plan.probe_images = count()?,
            (Plan::StepSearch(s), "sweeps") => s.plan.sweeps = count()?,
            (Plan::StepSearch(s), "baseline-steps") => s.plan.baseline_steps = count()?,
            (Plan::StepSearch(s), "seed") => s.plan.seed = seed()?,
            (Plan::StepSearch(s), "model") => s.model = path(),
            (Plan::StepSearch(s), "classifier") => s.classifier = path(),
            (Plan::StepSearch(s), "cache") => s.cache = path(),
            _ => {
                return Err(Error::Config(format!(
                    "experiment {kind} has no --{key}: its flags are --{}",
                    self.keys().join(", --")
                )))
            }
        }
        self.flags.push(format!("--{key} {value}"));
        Ok(())
    }

    /// The value of flag `key` (one of [`keys`](Self::keys)) as `set` takes it.
    pub fn get(&self, key: &str) -> String {
        let path = |p: &Path| p.display().to_string();
        match (&self.plan, key) {
            (_, "out") => path(&self.out),
            (Plan::AdaptiveSkip(s), "samples") => s.plan.samples.to_string(),
            (Plan::AdaptiveSkip(s), "batch") => s.plan.batch.to_string(),
            (Plan::AdaptiveSkip(s), "steps") => s.plan.steps.to_string(),
            (Plan::AdaptiveSkip(s), "seed") => s.plan.seed.to_string(),
            (Plan::AdaptiveSkip(s), "train-steps") => s.train_steps.to_string(),
            (Plan::AdaptiveSkip(s), "baseline") => path(&s.baseline),
            (Plan::AdaptiveSkip(s), "models") => path(&s.models),
            (Plan::AdaptiveSkip(s), "classifier") => path(&s.classifier),
            (Plan::AdaptiveSkip(s), "cache") => path(&s.cache),
            (Plan::Compression(s), "samples") => s.plan.samples.to_string(),
            (Plan::Compression(s), "steps") => s.plan.steps.to_string(),
            (Plan::Compression(s), "unet") => path(&s.unet),
            (Plan::Compression(s), "scorenet") => path(&s.scorenet),
            (Plan::Ladder(p), "ladder-batch") => p.ladder_batch.to_string(),
            (Plan::Ladder(p), "train-seconds") => p.train_seconds.to_string(),
            (Plan::Ladder(p), "reps") => p.ladder_reps.to_string(),
            (Plan::SkipSearch(s), "samples") => s.plan.samples.to_string(),
            (Plan::SkipSearch(s), "batch") => s.plan.batch.to_string(),
            (Plan::SkipSearch(s), "steps") => s.plan.steps.to_string(),
            (Plan::SkipSearch(s), "seed") => s.plan.seed.to_string(),
            (Plan::SkipSearch(s), "confirmations") => s.plan.confirmations.to_string(),
            (Plan::SkipSearch(s), "sampler") => s.plan.sampler.to_string(),
            (Plan::SkipSearch(s), "model") => path(&s.model),
            (Plan::SkipSearch(s), "classifier") => path(&s.classifier),
            (Plan::SkipSearch(s), "cache") => path(&s.cache),
            (Plan::SkipSearch(s), "budget") => s
                .plan
                .budgets
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            (Plan::Speedrun(p), "recipes") => p.recipes.join(","),
            (Plan::Speedrun(p), "budget") => p.budget_seconds.to_string(),
            (Plan::StepSearch(s), "samples") => s.plan.samples.to_string(),
            (Plan::StepSearch(s), "batch") => s.plan.batch.to_string(),
            (Plan::StepSearch(s), "steps") => s
                .plan
                .steps
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(","),
            (Plan::StepSearch(s), "sampler") => s.plan.sampler.to_string(),
            (Plan::StepSearch(s), "reference-steps") => s.plan.reference_steps.to_string(),
            (Plan::StepSearch(s), "probe-images") => s.plan.probe_images.to_string(),
            (Plan::StepSearch(s), "sweeps") => s.plan.sweeps.to_string(),
            (Plan::StepSearch(s), "baseline-steps") => s.plan.baseline_steps.to_string(),
            (Plan::StepSearch(s), "seed") => s.plan.seed.to_string(),
            (Plan::StepSearch(s), "model") => path(&s.model),
            (Plan::StepSearch(s), "classifier") => path(&s.classifier),
            (Plan::StepSearch(s), "cache") => path(&s.cache),
            _ => String::new(),
        }
    }

    /// The files a page fetches from its site before running this setup (models, the shipped
    /// classifier and its statistics), or why the experiment runs natively only.
    pub fn page_inputs(&self) -> Result<Vec<PathBuf>> {
        let scoring = |classifier: &Path| match classifier.as_os_str() == SHIPPED_MNIST_CLASSIFIER {
            true => Ok(vec![classifier.to_path_buf(), SHIPPED_MNIST_TEST_STATS.into()]),
            false => Err(Error::Config(format!(
                "a page scores MNIST-FID with the shipped classifier and its statistics of the test split, \
                 not {}: run this one natively (`wgdiff experiment`, the desktop app)",
                classifier.display()
            ))),
        };
        let native_only = |why: &str| {
            Err(Error::Config(format!(
                "experiment {} {why}: it runs natively only (`wgdiff experiment {}`, or the desktop app); a \
                 page runs compression, skip-search and step-search",
                self.kind().name(),
                self.kind().name()
            )))
        };
        let with = |mut models: Vec<PathBuf>, scoring: Vec<PathBuf>| {
            models.extend(scoring);
            Ok(models)
        };
        match &self.plan {
            Plan::StepSearch(s) => with(vec![s.model.clone()], scoring(&s.classifier)?),
            Plan::SkipSearch(s) => with(vec![s.model.clone()], scoring(&s.classifier)?),
            Plan::Compression(s) => with(
                vec![s.unet.clone(), s.scorenet.clone()],
                scoring(Path::new(SHIPPED_MNIST_CLASSIFIER))?,
            ),
            Plan::AdaptiveSkip(_) => {
                native_only("fine-tunes the skip-trained models it lacks and writes them")
            }
            Plan::Ladder(_) | Plan::Speedrun(_) => native_only("trains on MNIST's training split"),
        }
    }

    /// The `wgdiff experiment` command that runs this setup.
    pub fn command(&self) -> String {
        std::iter::once(format!("wgdiff experiment {}", self.kind().name()))
            .chain(self.flags.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Refuses a plan that cannot run, before any work.
    pub fn validate(&self) -> Result<()> {
        match &self.plan {
            Plan::Ladder(p) => p.validate(),
            Plan::SkipSearch(s) => s.plan.validate(),
            Plan::StepSearch(s) => s.plan.validate(),
            _ => Ok(()),
        }
    }
}

/// The axes of a plot an experiment draws live, and whether a series' points are joined in
/// the order they come (a curve over time) or stand alone (one point per setting).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LivePlot {
    pub title: &'static str,
    pub x: &'static str,
    /// The y axis; an MNIST-FID axis says over how many images it was scored.
    pub y: String,
    pub joined: bool,
}

impl LivePlot {
    fn new(title: &'static str, x: &'static str, y: &str, joined: bool) -> LivePlot {
        LivePlot {
            title,
            x,
            y: y.to_string(),
            joined,
        }
    }

    /// A plot whose y axis is MNIST-FID over `samples` images.
    fn mnist_fid(title: &'static str, x: &'static str, samples: usize, joined: bool) -> LivePlot {
        LivePlot::new(title, x, &mnist_fid_label(samples), joined)
    }
}

/// A table's column headings.
fn headings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// What an experiment reports while it runs (owned, so a job can send it on as it is).
pub enum Event {
    /// A phase started or something worth a line happened.
    Note(String),
    /// `done` of `total` `unit` of the current phase; `what` is running.
    Progress {
        done: usize,
        total: usize,
        unit: &'static str,
        what: String,
    },
    /// A row of one of the experiment's tables is measured; a row with a `key` seen before
    /// replaces that row (a compression row gets its time once its model's rows are timed).
    Row {
        table: &'static str,
        columns: Vec<String>,
        key: String,
        cells: Vec<String>,
    },
    /// A point of one of the experiment's plots, on the line of `series`.
    Point {
        plot: LivePlot,
        series: String,
        x: f64,
        y: f64,
    },
}

/// Where events go; an error it returns (the app's Cancel) stops the experiment.
pub type Sink<'a> = dyn FnMut(Event) -> Result<()> + 'a;

/// What a finished experiment made.
pub struct Finished {
    /// The report's Markdown (what `wgdiff experiment` prints).
    pub markdown: String,
    /// The report's files (natively written into the setup's folder; a page keeps them), its
    /// text files first and then its plots.
    pub files: Vec<ReportFile>,
}

impl Finished {
    /// The report files' names.
    pub fn names(&self) -> Vec<&str> {
        self.files.iter().map(|(name, _)| name.as_str()).collect()
    }
}

/// Runs `setup` on `gpu` with its files from `inputs`, telling `on_event` what happens; natively
/// then writes its report files into `setup.out` (the report's header names `command` and the
/// device). The same run for `wgdiff experiment`, the app and the page.
pub async fn run(
    gpu: &Gpu,
    setup: &Setup,
    inputs: &Inputs,
    command: &str,
    on_event: &mut Sink<'_>,
) -> Result<Finished> {
    setup.validate()?;
    #[cfg(not(target_arch = "wasm32"))]
    crate::fsio::check_writable_dir(&setup.out)?;
    let started = Instant::now();
    let header = || Header::new(crate::gpu::describe(&gpu.info), command.to_string(), started);
    let report: Box<dyn ExperimentReport> = match &setup.plan {
        Plan::AdaptiveSkip(s) => Box::new(adaptive_skip_run(gpu, s, inputs, header, on_event).await?),
        Plan::Compression(s) => Box::new(compression_run(gpu, s, inputs, header, on_event).await?),
        Plan::Ladder(p) => Box::new(ladder_run(gpu, p, inputs, header, on_event).await?),
        Plan::SkipSearch(s) => Box::new(skip_search_run(gpu, s, inputs, header, on_event).await?),
        Plan::Speedrun(p) => Box::new(speedrun_run(gpu, p, inputs, header, on_event).await?),
        Plan::StepSearch(s) => Box::new(step_search_run(gpu, s, inputs, header, on_event).await?),
    };
    #[cfg(not(target_arch = "wasm32"))]
    let files = super::write_report(report.as_ref(), &setup.out)?;
    #[cfg(target_arch = "wasm32")]
    let files = report.files()?;
    Ok(Finished {
        markdown: report.markdown(),
        files,
    })
}

/// MNIST-FID of the classifier in `classifier` against the MNIST test split, with the
/// reference's progress as events: natively its statistics cached in `cache` (computed once);
/// with fetched inputs the shipped classifier's shipped statistics ([`Setup::page_inputs`]).
async fn mnist_fid(
    gpu: &Gpu,
    inputs: &Inputs,
    (classifier, cache): (&Path, &Path),
    on_event: &mut Sink<'_>,
) -> Result<MnistFid> {
    if let Inputs::Fetched(_) = inputs {
        return inputs.shipped_mnist_fid(gpu);
    }
    let mut failed = None;
    let fid = MnistFid::of_test_split(gpu, classifier, "mnist", cache, &mut |done, total| {
        if let Err(e) = on_event(Event::Progress {
            done,
            total,
            unit: "reference images",
            what: "MNIST-FID reference".into(),
        }) {
            failed.get_or_insert(e);
        }
    })
    .await?;
    if let Some(e) = failed {
        return Err(e);
    }
    let source = &fid.reference.source;
    on_event(Event::Note(format!(
        "MNIST-FID reference: {} {} images",
        source.images, source.dataset
    )))?;
    Ok(fid)
}

/// Progress over the training seconds of runs that take turns (the speed-run's recipes, the
/// ladder's ablation rows), each counted up to the budget of one.
struct TrainingSeconds {
    budget: f64,
    runs: usize,
    trained: Vec<(String, f64)>,
}

impl TrainingSeconds {
    fn new(runs: usize, budget: f64) -> TrainingSeconds {
        TrainingSeconds {
            budget,
            runs,
            trained: Vec::new(),
        }
    }

    /// `name` has trained `seconds` in all: the progress event.
    fn event(&mut self, name: &str, seconds: f64) -> Event {
        match self.trained.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = seconds,
            None => self.trained.push((name.to_string(), seconds)),
        }
        let done: f64 = self.trained.iter().map(|(_, s)| s.min(self.budget)).sum();
        Event::Progress {
            done: done as usize,
            total: (self.budget * self.runs as f64).ceil() as usize,
            unit: "training seconds",
            what: name.to_string(),
        }
    }
}

fn rung_steps() -> LivePlot {
    LivePlot::new("ConvNeXt training step per rung", "round", "ms per step", true)
}
fn ablation(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "Ablation: MNIST-FID against ms per step",
        "ms per training step",
        samples,
        false,
    )
}

async fn ladder_run(
    gpu: &Gpu,
    plan: &ladder::Plan,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<ladder_report::Report> {
    use ladder::Progress;
    let arms = ladder::arms(plan)?;
    let rungs_count = ladder::RUNGS.len();
    let rungs = ladder::run_ladder(gpu, &ladder::RUNGS, plan, |event| match event {
        Progress::WarmingUp(rung) => on_event(Event::Note(format!("ladder: warm-up step of {rung}"))),
        Progress::RungStep {
            rung,
            done,
            total,
            ms,
        } => {
            on_event(Event::Progress {
                done,
                total,
                unit: "ConvNeXt steps",
                what: rung.to_string(),
            })?;
            on_event(Event::Point {
                plot: rung_steps(),
                series: rung.to_string(),
                x: ((done - 1) / rungs_count + 1) as f64,
                y: ms,
            })
        }
        Progress::Trained { .. } | Progress::Scored { .. } => Ok(()),
    })
    .await?;
    for r in &rungs {
        on_event(Event::Row {
            table: "Table 1: a ConvNeXt DDPM training step, rung by rung",
            columns: headings(&["rung", "conv", "median ms", "speed-up vs first", "vs previous"]),
            key: r.name.clone(),
            cells: vec![
                r.name.clone(),
                r.conv.clone(),
                format!("{:.0}", r.median_ms),
                format!("{:.2}x", r.speedup_vs_first),
                format!("{:.2}x", r.speedup_vs_previous),
            ],
        })?;
    }

    let tracker = inputs.shipped_mnist_fid(gpu)?.into();
    let mut training = TrainingSeconds::new(arms.len(), plan.train_seconds);
    let rows = ladder::run_ablation(gpu, &arms, plan, &tracker, |event| match event {
        Progress::WarmingUp(row) => on_event(Event::Note(format!("ablation: warm-up step of {row}"))),
        Progress::Trained { row, seconds } => on_event(training.event(row, seconds)),
        Progress::Scored { row, fid } => {
            on_event(Event::Note(format!("ablation: {row}: MNIST-FID {fid:.1}")))
        }
        Progress::RungStep { .. } => Ok(()),
    })
    .await?;
    for r in &rows {
        on_event(Event::Row {
            table: "Table 2: the mnist-small U-Net, one switch per row",
            columns: [
                headings(&["row", "steps", "median ms", "speed-up", "peak MiB"]),
                vec![mnist_fid_label(plan.fid_samples)],
            ]
            .concat(),
            key: r.name.clone(),
            cells: vec![
                r.name.clone(),
                r.steps.to_string(),
                format!("{:.0}", r.median_ms),
                format!("{:.2}x", r.speedup),
                format!("{:.1}", r.step_peak_bytes as f64 / (1 << 20) as f64),
                format!("{:.1}", r.fid),
            ],
        })?;
        on_event(Event::Point {
            plot: ablation(plan.fid_samples),
            series: r.name.clone(),
            x: r.median_ms,
            y: r.fid,
        })?;
    }
    Ok(ladder_report::Report {
        header: header(),
        plan: plan.clone(),
        rungs,
        rows,
    })
}

fn fid_vs_size(samples: usize) -> LivePlot {
    LivePlot::mnist_fid("MNIST-FID against size", "MB (sampling export)", samples, false)
}
fn fid_vs_ms(samples: usize) -> LivePlot {
    LivePlot::mnist_fid("MNIST-FID against ms per image", "ms per image", samples, false)
}

async fn compression_run(
    gpu: &Gpu,
    setup: &CompressionSetup,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<compression::Report> {
    use compression::Progress;
    let (unet, scorenet) = (
        inputs.checkpoint(&setup.unet)?,
        inputs.checkpoint(&setup.scorenet)?,
    );
    let subjects = [
        compression::Subject {
            label: "DDPM U-Net",
            checkpoint: &unet,
            origin: setup.unet.display().to_string(),
            published: &compression::PUBLISHED_DDPM,
        },
        compression::Subject {
            label: "NCSN ScoreNet",
            checkpoint: &scorenet,
            origin: setup.scorenet.display().to_string(),
            published: &compression::PUBLISHED_NCSN,
        },
    ];
    let tracker = inputs.shipped_mnist_fid(gpu)?.into();
    let total = subjects.len() * compression::settings().len();
    let mut measured = 0;
    let rows = compression::run(gpu, &subjects, &setup.plan, &tracker, |event| match event {
        Progress::Started(what) => {
            on_event(Event::Note(what.to_string()))?;
            on_event(Event::Progress {
                done: measured,
                total,
                unit: "rows",
                what: what.to_string(),
            })
        }
        Progress::Measured(row) => {
            let timed = row.ms_per_image > 0.0;
            if !timed {
                measured += 1;
            }
            on_event(Event::Row {
                table: "Compression: size, speed and MNIST-FID per setting",
                columns: [
                    headings(&["model", "setting", "MB", "gzipped MB", "ms per image", "peak MiB"]),
                    vec![mnist_fid_label(setup.plan.samples)],
                ]
                .concat(),
                key: format!("{}: {}", row.model, row.setting),
                cells: vec![
                    row.model.clone(),
                    row.setting.clone(),
                    format!("{:.2}", row.bytes as f64 / 1e6),
                    format!("{:.2}", row.gzipped_bytes as f64 / 1e6),
                    match timed {
                        true => format!("{:.1}", row.ms_per_image),
                        false => "timed with its model's rows".into(),
                    },
                    format!("{:.1}", row.peak_bytes as f64 / (1 << 20) as f64),
                    format!("{:.1}", row.fid),
                ],
            })?;
            let (plot, x) = match timed {
                true => (fid_vs_ms(setup.plan.samples), row.ms_per_image),
                false => (fid_vs_size(setup.plan.samples), row.bytes as f64 / 1e6),
            };
            on_event(Event::Point {
                plot,
                series: row.model.clone(),
                x,
                y: row.fid,
            })
        }
    })
    .await?;
    Ok(compression::Report {
        header: header(),
        plan: setup.plan.clone(),
        rows,
    })
}

fn fid_vs_training(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "MNIST-FID against training time",
        "training seconds",
        samples,
        true,
    )
}

async fn speedrun_run(
    gpu: &Gpu,
    plan: &speedrun::Plan,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<speedrun::Report> {
    let recipes = speedrun::choose_recipes(&plan.recipes)?;
    let tracker = inputs.shipped_mnist_fid(gpu)?.into();
    let mut training = TrainingSeconds::new(recipes.len(), plan.budget_seconds);
    let curves = speedrun::run(gpu, &recipes, plan, &tracker, |recipe, seconds, point| {
        if let Some(p) = point {
            on_event(Event::Note(format!(
                "{recipe}: {:.0} s of training, step {}, mean loss {:.4}, MNIST-FID {:.1}",
                p.train_seconds, p.step, p.loss, p.fid
            )))?;
            on_event(Event::Row {
                table: "Evaluations: MNIST-FID during training",
                columns: [
                    headings(&["recipe", "training s", "step", "mean loss"]),
                    vec![mnist_fid_label(plan.fid_samples)],
                ]
                .concat(),
                key: format!("{recipe} {}", p.step),
                cells: vec![
                    recipe.to_string(),
                    format!("{:.0}", p.train_seconds),
                    p.step.to_string(),
                    format!("{:.4}", p.loss),
                    format!("{:.1}", p.fid),
                ],
            })?;
            on_event(Event::Point {
                plot: fid_vs_training(plan.fid_samples),
                series: recipe.to_string(),
                x: p.train_seconds,
                y: p.fid,
            })?;
        }
        on_event(training.event(recipe, seconds))
    })
    .await?;
    Ok(speedrun::Report {
        header: header(),
        plan: plan.clone(),
        curves,
    })
}

fn fid_vs_speedup(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "MNIST-FID against sampling speed-up",
        "speed-up (%)",
        samples,
        true,
    )
}

async fn adaptive_skip_run(
    gpu: &Gpu,
    setup: &AdaptiveSkipSetup,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<super::report::Report> {
    let (baseline, plan) = (&setup.baseline, &setup.plan);
    let mut models = vec![SkipModel {
        label: BASELINE_LABEL.into(),
        path: baseline.display().to_string(),
        model: inputs.model(gpu, baseline, None).await?,
    }];
    let own_skip_type = models[0].skip_type()?;
    let [c, h, w] = models[0].model.image_shape();
    let timings_only = [c, h, w] != MNIST_IMAGE_SHAPE;
    if timings_only {
        on_event(Event::Note(format!(
            "{} is a {c}x{h}x{w} model, not MNIST's 1x28x28: timings only (MNIST-FID cannot score it, and \
             skip-trained models would need its training data); the rows are its own weights under each skip \
             type, untrained for skips (interpolate's 1x1 convs start fresh)",
            baseline.display()
        )))?;
        for skip_type in [SkipType::Zero, SkipType::Duplicate, SkipType::Interpolate] {
            if skip_type != own_skip_type {
                let title = SKIP_MODELS.iter().find(|m| m.1 == skip_type).map_or("", |m| m.0);
                models.push(SkipModel {
                    label: format!("{title} (no training for skips)"),
                    path: baseline.display().to_string(),
                    model: inputs.model(gpu, baseline, Some(skip_type)).await?,
                });
            }
        }
    }
    for (label, skip_type, scheme, suffix) in SKIP_MODELS.into_iter().filter(|_| !timings_only) {
        let path = skip_model_path(&setup.models, baseline, suffix);
        if !crate::fsio::exists(&path) {
            let what = format!(
                "{} is missing: fine-tuning {} for skip type {skip_type} with {scheme:?} training ({} steps)",
                path.display(),
                baseline.display(),
                setup.train_steps
            );
            on_event(Event::Note(what.to_string()))?;
            adaptive_skip::fine_tune(
                gpu,
                baseline,
                (skip_type, scheme),
                setup.train_steps,
                &path,
                |step, loss| {
                    on_event(Event::Progress {
                        done: step,
                        total: setup.train_steps,
                        unit: "fine-tuning steps",
                        what: format!("{label}: loss {loss:.4}"),
                    })
                },
            )
            .await?;
        }
        models.push(SkipModel {
            label: label.into(),
            path: path.display().to_string(),
            model: inputs.model(gpu, &path, None).await?,
        });
    }
    for m in &models {
        m.skip_type()?;
    }
    let mnist_fid = match timings_only {
        true => None,
        false => Some(mnist_fid(gpu, inputs, (&setup.classifier, &setup.cache), on_event).await?),
    };
    let scoring = mnist_fid
        .as_ref()
        .map(|m| (&m.classifier as &dyn crate::eval::FeatureNet, &m.reference));
    let arms = adaptive_skip::arms(&models, plan);
    on_event(Event::Note(format!(
        "{} arms x {} samples in batches of {} (round-robin, so every arm sees the same machine load)",
        arms.len(),
        plan.samples,
        plan.batch
    )))?;
    let results = adaptive_skip::run(gpu, &models, &arms, plan, scoring, |done, total, label| {
        on_event(Event::Progress {
            done,
            total,
            unit: "batches",
            what: label.to_string(),
        })
    })
    .await?;
    for a in &results {
        let sampler = match a.eta {
            Some(eta) => format!("ddim eta {eta}"),
            None => a.sampler.clone(),
        };
        let speedup = a.speedup_percent.map_or("-".into(), |s| format!("{s:.1}%"));
        let fid = a.scores.as_ref().map(|s| s.fid);
        on_event(Event::Row {
            table: "Arms: MNIST-FID and speed-up per model, exponent c and sampler",
            columns: [
                headings(&["model", "c", "sampler", "steps", "speed-up"]),
                vec![mnist_fid_label(plan.samples)],
            ]
            .concat(),
            key: format!("{} {} {sampler} {}", a.model, a.exponent, a.steps),
            cells: vec![
                a.model.clone(),
                a.exponent.to_string(),
                sampler,
                a.steps.to_string(),
                speedup,
                fid.map_or("-".into(), |f| format!("{f:.1}")),
            ],
        })?;
        if let (None, Some(s), true, Some(fid)) = (a.eta, a.speedup_percent, a.steps == plan.steps, fid) {
            on_event(Event::Point {
                plot: fid_vs_speedup(plan.samples),
                series: a.model.clone(),
                x: s,
                y: fid,
            })?;
        }
    }
    let (metric, reference) = match &mnist_fid {
        Some(m) => (
            mnist_fid_label(plan.samples),
            format!(
                "{} {} images",
                m.reference.source.images, m.reference.source.dataset
            ),
        ),
        None => (
            "quality not scored (timings only)".to_string(),
            "nothing".to_string(),
        ),
    };
    Ok(super::report::Report {
        header: header(),
        plan: plan.clone(),
        metric,
        reference,
        models: models.iter().map(ModelInfo::of).collect::<Result<_>>()?,
        arms: results,
    })
}

fn searched(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "Searched schedules: MNIST-FID against predicted time",
        "predicted ms per run",
        samples,
        false,
    )
}
fn arms_time_vs_fid(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "Arms: MNIST-FID against ms per image",
        "ms per image",
        samples,
        false,
    )
}

async fn skip_search_run(
    gpu: &Gpu,
    setup: &SkipSearchSetup,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<skip_search_report::Report> {
    use skip_search::{Bench, Origin, SearchEvent};
    let plan = &setup.plan;
    let model = inputs.model(gpu, &setup.model, None).await?;
    let levels = model.net.levels();
    if levels < 2 {
        return Err(Error::Config(format!(
            "{} has no levels to skip (a {}); the search needs a U-Net",
            setup.model.display(),
            model.state.model.kind_name()
        )));
    }
    let MnistFid {
        classifier,
        reference,
        ..
    } = mnist_fid(gpu, inputs, (&setup.classifier, &setup.cache), on_event).await?;
    let bench = Bench {
        sampling: model.sampling(),
        features: &classifier,
        reference: &reference,
    };
    let mut search_event = |event: SearchEvent| match event {
        SearchEvent::Phase(what) => on_event(Event::Note(what.to_string())),
        SearchEvent::Sampling { what, done, total } => on_event(Event::Progress {
            done,
            total,
            unit: "images",
            what: what.to_string(),
        }),
        SearchEvent::Confirmed(a) => {
            let schedule = crate::diffusion::join_depths(&a.skips);
            on_event(Event::Note(format!(
                "budget {}: proxy budget {:.2e} -> [{schedule}], predicted {:.0} ms per run, MNIST-FID {:.2} ({})",
                a.budget,
                a.proxy_budget,
                a.predicted_ms,
                a.fid,
                if a.accepted { "within budget" } else { "over budget" }
            )))?;
            on_event(Event::Row {
                table: "Confirmations: schedules scored on the way to each budget",
                columns: vec![
                    "budget".into(),
                    "proxy budget".into(),
                    "schedule".into(),
                    "predicted ms".into(),
                    mnist_fid_label(plan.samples),
                    "within".into(),
                ],
                key: format!("{} {:e}", a.budget, a.proxy_budget),
                cells: vec![
                    a.budget.to_string(),
                    format!("{:.2e}", a.proxy_budget),
                    schedule,
                    format!("{:.0}", a.predicted_ms),
                    format!("{:.2}", a.fid),
                    if a.accepted { "yes" } else { "no" }.into(),
                ],
            })?;
            on_event(Event::Point {
                plot: searched(plan.samples),
                series: format!("budget {}", a.budget),
                x: a.predicted_ms,
                y: a.fid,
            })
        }
        SearchEvent::Batch { done, total, arm } => on_event(Event::Progress {
            done,
            total,
            unit: "batches",
            what: arm.to_string(),
        }),
    };
    search_event(SearchEvent::Phase("timing one network call at every skip depth"))?;
    let probe = bench.request(plan, Default::default(), None)?;
    let costs = skip_search::measure_depth_costs(gpu, bench.sampling, &probe, plan.cost_rounds).await?;
    search_event(SearchEvent::Phase(
        "measuring the proxy (x_0 difference per step and depth)",
    ))?;
    let proxy = skip_search::measure_proxy(gpu, bench.sampling, &probe).await?;
    let zeros = vec![0; plan.steps];
    let fid0 = bench
        .fid(gpu, plan, &zeros, "unskipped", &mut search_event)
        .await?
        .fid;
    search_event(SearchEvent::Phase(&format!("unskipped MNIST-FID {fid0:.2}")))?;
    let searched = skip_search::search(gpu, &bench, plan, (&costs, &proxy), fid0, &mut search_event).await?;
    let arms = skip_search::arms(plan, levels, &searched);
    search_event(SearchEvent::Phase(&format!(
        "{} arms x {} images in batches of {}, in turn",
        arms.len(),
        plan.samples,
        plan.batch
    )))?;
    let arms = skip_search::compare(gpu, &bench, plan, &arms, &proxy, &mut search_event).await?;
    for a in &arms {
        on_event(Event::Row {
            table: "Arms: time and MNIST-FID, taking turns",
            columns: [
                headings(&["arm", "mean skip", "ms per image", "speed-up"]),
                vec![mnist_fid_label(plan.samples)],
            ]
            .concat(),
            key: a.arm.label.clone(),
            cells: vec![
                a.arm.label.clone(),
                format!("{:.2}", a.mean_skip),
                format!("{:.1}", a.ms_per_image),
                format!("{:.1}%", a.speedup_percent),
                format!("{:.2}", a.scores.fid),
            ],
        })?;
        on_event(Event::Point {
            plot: arms_time_vs_fid(plan.samples),
            series: a.arm.label.clone(),
            x: a.ms_per_image,
            y: a.scores.fid,
        })?;
    }
    let header = header();
    Ok(skip_search_report::Report {
        origin: Origin {
            model: setup.model.display().to_string(),
            metric: mnist_fid_label(plan.samples),
            fid_unskipped: fid0,
            date: header.date.clone(),
        },
        header,
        plan: plan.clone(),
        levels,
        costs_ms: costs,
        proxy,
        searched,
        arms,
    })
}

fn step_search_probes() -> LivePlot {
    LivePlot::new(
        "Step search: distance from the many-step run per probe run",
        "probe run",
        "mean squared difference",
        true,
    )
}
fn schedules_time_vs_fid(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "Every schedule: MNIST-FID against ms per image",
        "ms per image",
        samples,
        false,
    )
}

async fn step_search_run(
    gpu: &Gpu,
    setup: &StepSearchSetup,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<step_search_report::Report> {
    let plan = &setup.plan;
    let model = inputs.model(gpu, &setup.model, None).await?;
    let sampling = model.sampling();
    if model.image_shape() != MNIST_IMAGE_SHAPE {
        return Err(Error::Config(format!(
            "{} samples {:?} images; the step search scores MNIST-FID, which needs 1x28x28 MNIST digits",
            setup.model.display(),
            model.image_shape()
        )));
    }
    let MnistFid {
        classifier,
        reference,
        ..
    } = mnist_fid(gpu, inputs, (&setup.classifier, &setup.cache), on_event).await?;
    // every row: the model's own guidance, a mix of its classes
    let base = crate::pipeline::SampleRequest::for_state(&model.state)
        .count(plan.batch)
        .seed(plan.seed)
        .build()?;
    let probe = base.with_count(plan.probe_images)?;
    on_event(Event::Note(format!(
        "the reference: {} at {} steps on {} probe images",
        plan.sampler, plan.reference_steps, plan.probe_images
    )))?;
    let reference_run = probe.with_sampler(plan.sampler, plan.reference_steps)?;
    let reference_samples = step_search::probe_samples(gpu, sampling, &reference_run).await?;
    let mut searched = Vec::new();
    for &steps in &plan.steps {
        on_event(Event::Note(format!("searching {steps} timesteps")))?;
        let found = step_search::search(
            gpu,
            sampling,
            plan,
            (&probe, &reference_samples),
            steps,
            &mut |p| {
                on_event(Event::Progress {
                    done: p.done,
                    total: p.total,
                    unit: "probe runs",
                    what: format!("{steps} steps"),
                })?;
                on_event(Event::Point {
                    plot: step_search_probes(),
                    series: format!("{} steps", p.steps),
                    x: p.done as f64,
                    y: p.best,
                })
            },
        )
        .await?;
        on_event(Event::Row {
            table: "Searched timesteps: distance from the many-step run",
            columns: headings(&["steps", "start", "start's distance", "searched", "timesteps"]),
            key: steps.to_string(),
            cells: vec![
                steps.to_string(),
                found.start.clone(),
                format!("{:.2e}", found.start_discrepancy()),
                format!("{:.2e}", found.discrepancy),
                found.timesteps_text(),
            ],
        })?;
        searched.push(found);
    }
    let arms = step_search::arms(plan, &base, &searched)?;
    on_event(Event::Note(format!(
        "{} rows x {} images in batches of {}, in turn",
        arms.len(),
        plan.samples,
        plan.batch
    )))?;
    let arms = step_search::compare(
        gpu,
        sampling,
        plan,
        &arms,
        (&classifier, &reference),
        |done, total, arm| {
            on_event(Event::Progress {
                done,
                total,
                unit: "batches",
                what: arm.to_string(),
            })
        },
    )
    .await?;
    for a in &arms {
        on_event(Event::Row {
            table: "Every schedule: time and MNIST-FID, taking turns",
            columns: vec![
                "sampler, steps, schedule".into(),
                mnist_fid_label(plan.samples),
                "ms per image".into(),
            ],
            key: a.arm.label.clone(),
            cells: vec![
                a.arm.label.clone(),
                format!("{:.2}", a.scores.fid),
                format!("{:.1}", a.ms_per_image),
            ],
        })?;
        on_event(Event::Point {
            plot: schedules_time_vs_fid(plan.samples),
            series: a.arm.schedule.clone(),
            x: a.ms_per_image,
            y: a.scores.fid,
        })?;
    }
    Ok(step_search_report::Report {
        header: header(),
        plan: plan.clone(),
        model: setup.model.display().to_string(),
        levels: model.net.levels(),
        metric: mnist_fid_label(plan.samples),
        searched,
        arms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_reads_back_what_was_set_and_the_command_names_it() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.name()).unwrap(), kind);
            let mut setup = Setup::new(kind, true);
            for &key in setup.keys() {
                // each flag's value as the plan has it sets cleanly and reads back the same
                let value = setup.get(key);
                assert!(!value.is_empty(), "{} --{key}", kind.name());
                setup.set(key, &value).unwrap();
                assert_eq!(setup.get(key), value, "{} --{key}", kind.name());
            }
            assert!(setup
                .command()
                .starts_with(&format!("wgdiff experiment {} --quick", kind.name())));
        }
        let mut setup = Setup::new(Kind::Compression, false);
        setup.set("samples", "50").unwrap();
        assert_eq!(setup.command(), "wgdiff experiment compression --samples 50");
    }

    #[test]
    fn a_flag_the_experiment_lacks_or_a_bad_value_is_refused_by_name() {
        let mut setup = Setup::new(Kind::Ladder, true);
        let err = setup.set("samples", "5").unwrap_err().to_string();
        assert!(
            err.contains("experiment ladder has no --samples") && err.contains("--train-seconds"),
            "{err}"
        );
        let err = setup.set("train-seconds", "-3").unwrap_err().to_string();
        assert!(
            err.contains("--train-seconds \"-3\" is not a positive number of seconds"),
            "{err}"
        );
        let err = Kind::parse("speed").unwrap_err().to_string();
        assert!(
            err.contains("adaptive-skip, compression, ladder, skip-search, speedrun"),
            "{err}"
        );
        let mut search = Setup::new(Kind::SkipSearch, true);
        assert!(search.set("budget", "5,x").is_err());
        search.set("budget", "5,15").unwrap();
        assert_eq!(search.get("budget"), "5,15");
    }
}
