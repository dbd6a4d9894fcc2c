//! The folder a training run writes to: an earlier run's checkpoint there is never replaced
//! silently (a default folder moves on to a numbered one; a chosen one needs `force`).

use crate::fsio::same_file;
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// How the run's output folder was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutRequest {
    /// The built-in default (`runs/mnist`): when it holds a run, the next free `-2`, `-3`, ...
    Default,
    /// Named by the user: when it holds a run, an error unless `force`.
    Chosen { force: bool },
}

/// The checkpoint file a run keeps in `folder`.
pub fn checkpoint_in(folder: &Path) -> PathBuf {
    folder.join("checkpoint.safetensors")
}

/// The folder to write to for a run asked to write to `requested`. `resuming` is the
/// checkpoint a resumed run continues from: writing its own folder again is the point of a
/// resume, not a loss.
pub fn run_folder(requested: &Path, how: OutRequest, resuming: Option<&Path>) -> Result<PathBuf> {
    let holds_other_run = |folder: &Path| {
        let checkpoint = checkpoint_in(folder);
        checkpoint.exists() && !resuming.is_some_and(|r| same_file(r, &checkpoint))
    };
    if !holds_other_run(requested) {
        return Ok(requested.to_path_buf());
    }
    match how {
        OutRequest::Chosen { force: true } => Ok(requested.to_path_buf()),
        OutRequest::Chosen { force: false } => Err(Error::Config(format!(
            "{} already holds a run ({}); choose another --out, continue it with `wgdiff train --resume {}`, \
             or pass --force to overwrite it",
            requested.display(),
            checkpoint_in(requested).display(),
            checkpoint_in(requested).display()
        ))),
        OutRequest::Default => {
            let name = requested
                .file_name()
                .map_or("run".into(), |n| n.to_string_lossy().into_owned());
            (2..)
                .map(|n| requested.with_file_name(format!("{name}-{n}")))
                .find(|folder| !holds_other_run(folder))
                .ok_or_else(|| Error::Config("no free run folder".into()))
        }
    }
}
