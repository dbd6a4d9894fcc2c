//! The library's error type: every failure names what went wrong and, where there is one,
//! the fix (a package to install, a flag to pass, a shape to change).

use thiserror::Error;

/// Everything the engine can fail with.
#[derive(Debug, Error)]
pub enum Error {
    /// No adapter matched the requested backend/name, or none exists at all.
    #[error("{0}")]
    NoAdapter(String),
    /// The adapter refused to create a device.
    #[error("could not open a device on adapter \"{adapter}\": {reason}")]
    RequestDevice { adapter: String, reason: String },
    /// Operands whose shapes or dtypes do not fit the operation.
    #[error("{op}: {msg}")]
    Shape { op: &'static str, msg: String },
    /// A buffer larger than the device allows for one binding.
    #[error("{what} needs {bytes} bytes but this device allows at most {limit} bytes per storage binding; use smaller batches or shapes")]
    TooLarge { what: String, bytes: u64, limit: u64 },
    /// An allocation beyond the budget set by [`crate::gpu::with_alloc_budget`] (e.g. a model
    /// whose checkpoint metadata describes far more weights than the file holds).
    #[error("{what} needs {bytes} bytes, beyond the {budget} bytes allowed for this work")]
    OverBudget { what: String, bytes: u64, budget: u64 },
    /// Reading a buffer back from the device failed.
    #[error("reading back {what} failed: {reason}")]
    Readback { what: String, reason: String },
    /// The profiler was used out of order or cannot time this device.
    #[error("profiler: {0}")]
    Profiler(String),
    /// A file the engine keeps (caches, traces) could not be written or read.
    #[error("{what}: {reason}")]
    Io { what: String, reason: String },
    /// A checkpoint file that is missing, corrupt, or written for another model.
    #[error("checkpoint {path}: {msg}")]
    Checkpoint { path: String, msg: String },
    /// A configuration (model, training run, preset name) that cannot be used.
    #[error("{0}")]
    Config(String),
    /// A dataset file, folder or data-source string that cannot be used: `path` names it
    /// (or the dataset), `msg` says what was expected, what was found and the fix.
    #[error("{path}: {msg}")]
    Data { path: String, msg: String },
    /// A training run that cannot continue; says how to recover.
    #[error("{0}")]
    Training(String),
    /// A training run whose loss or weights blew up (NaN, infinite, or past
    /// `run_state::DIVERGED_WEIGHT`): says what, where the last good checkpoint is kept and how
    /// to resume it.
    #[error("{0}")]
    Diverged(String),
    /// An operation that needs gradients found none.
    #[error("{0}")]
    Autograd(String),
    /// A noise process, training loss or sampler given settings that do not fit together.
    #[error("{0}")]
    Diffusion(String),
    /// Features, logits or a feature-statistics file that a metric (FID, KID, IS) cannot use:
    /// `what` names the input, `msg` says what was expected, what was found and the fix.
    #[error("{what}: {msg}")]
    Metrics { what: String, msg: String },
    /// A feature network's weight file (e.g. Inception) that is missing, corrupt or for another
    /// network: `msg` names the tensor, the expected and found shapes and the fix.
    #[error("weights {path}: {msg}")]
    Weights { path: String, msg: String },
    /// A data-parallel run whose processes or replicas disagree or cannot communicate.
    #[error("distributed training: {0}")]
    Distributed(String),
    /// Work stopped because its caller asked it to (the app's cancel button).
    #[error("cancelled")]
    Cancelled,
}

/// Result with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for a shape/dtype error of an op.
    pub fn shape(op: &'static str, msg: impl Into<String>) -> Self {
        Error::Shape { op, msg: msg.into() }
    }

    /// Shorthand for a metrics error about the input `what`.
    pub fn metrics(what: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Metrics {
            what: what.into(),
            msg: msg.into(),
        }
    }

    /// Shorthand for a data error about a file or folder.
    pub fn data(path: &std::path::Path, msg: impl Into<String>) -> Self {
        Error::Data {
            path: path.display().to_string(),
            msg: msg.into(),
        }
    }
}
