//! Which experiment and how much: [`Kind`] (the six, their names and what each reproduces),
//! each one's setup (plan, models, classifier, output folder) and [`Setup`]: built from the
//! quick or full plan, changed flag by flag (`set`, `get`, `keys`), the command that does the
//! same, the files a page must fetch.

use crate::classifier::{SHIPPED_MNIST_CLASSIFIER, SHIPPED_MNIST_TEST_STATS};
use crate::eval::DEFAULT_STATS_CACHE;
use crate::experiment::{
    adaptive_skip, compression, ladder, skip_search, speedrun, step_search, ExperimentPlan,
};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

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
            Plan::Speedrun(_) => &["recipes", "budget", "samples", "out"],
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
            (Plan::Speedrun(p), "samples") => match count()? {
                n if n >= 2 => p.fid_samples = n,
                _ => return Err(bad("a count of at least 2 images (MNIST-FID needs two)")),
            },
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
            (Plan::Speedrun(p), "samples") => p.fid_samples.to_string(),
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
