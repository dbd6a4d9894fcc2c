//! `wgdiff export`: a checkpoint's EMA weights alone (what sampling needs), a quarter of the
//! file, for the web page or for sharing; `sample`, `eval`, the app and `--init` read it.

use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use wgdiff::checkpoint::Checkpoint;
use wgdiff::pipeline::DEFAULT_CHECKPOINT;

/// Flags of `wgdiff export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The `wgdiff train` checkpoint to export
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    checkpoint: PathBuf,
    /// The export to write (.safetensors; never the checkpoint itself)
    #[arg(long)]
    out: PathBuf,
}

/// Writes the EMA-only export of `--checkpoint` to `--out` (atomically).
pub fn run(args: ExportArgs) -> Result<()> {
    if args.out.extension().is_none_or(|e| e != "safetensors") {
        bail!("--out {}: an export is a .safetensors file", args.out.display());
    }
    if wgdiff::fsio::same_file(&args.checkpoint, &args.out) {
        bail!(
            "--out {} is the checkpoint itself; export to another file (the export cannot resume training)",
            args.out.display()
        );
    }
    let ckpt = Checkpoint::load(&args.checkpoint)?;
    let export = wgdiff::run_state::sampling_export(&ckpt, &args.checkpoint.display().to_string())?;
    export.save(&args.out)?;
    let size = |path: &PathBuf| std::fs::metadata(path).map_or(0, |m| m.len());
    eprintln!(
        "{}: {} tensors, {:.2} MB (the checkpoint: {} tensors, {:.2} MB)",
        args.out.display(),
        export.tensors.len(),
        size(&args.out) as f64 / 1e6,
        ckpt.tensors.len(),
        size(&args.checkpoint) as f64 / 1e6
    );
    Ok(())
}
