//! `wgdiff export`: a checkpoint's EMA weights alone (what sampling needs), a quarter of the
//! file, for the web page or for sharing; or the model as a diffusers `UNet2DModel` folder.

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use wgdiff::pipeline::diffusers::{CONFIG_FILE, SCHEDULER_FILE, WEIGHTS_FILE};
use wgdiff::pipeline::{diffusers_export, read_checkpoint, TrainedModel, DEFAULT_CHECKPOINT};
use wgdiff::AdapterChoice;

/// What `wgdiff export` writes.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// One .safetensors file with the EMA weights and the training state: sample, eval, the
    /// app, the page and --init read it
    Wgdiff,
    /// A folder in the Hugging Face diffusers layout (config.json,
    /// diffusion_pytorch_model.safetensors, scheduler_config.json) that
    /// UNet2DModel.from_pretrained and DDPMScheduler.from_pretrained load; U-Nets only
    Diffusers,
}

/// Flags of `wgdiff export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The `wgdiff train` checkpoint to export (or, with --format diffusers, a diffusers folder)
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    checkpoint: PathBuf,
    /// The export to write: a .safetensors file, or with --format diffusers a new (or empty)
    /// folder; never the checkpoint itself
    #[arg(long)]
    out: PathBuf,
    /// The layout of the export
    #[arg(long, value_enum, default_value = "wgdiff")]
    format: Format,
}

/// Writes the export of `--checkpoint` to `--out` (atomically).
pub fn run(choice: AdapterChoice, args: ExportArgs) -> Result<()> {
    match args.format {
        Format::Wgdiff => export_wgdiff(&args.checkpoint, &args.out),
        Format::Diffusers => export_diffusers(choice, &args.checkpoint, &args.out),
    }
}

fn export_wgdiff(checkpoint: &Path, out: &Path) -> Result<()> {
    if out.extension().is_none_or(|e| e != "safetensors") {
        bail!(
            "--out {}: an export is a .safetensors file (a diffusers folder: --format diffusers)",
            out.display()
        );
    }
    if wgdiff::fsio::same_file(checkpoint, out) {
        bail!(
            "--out {} is the checkpoint itself; export to another file (the export cannot resume training)",
            out.display()
        );
    }
    let ckpt = read_checkpoint(checkpoint)?;
    let export = wgdiff::run_state::sampling_export(&ckpt, &checkpoint.display().to_string())?;
    export.save(out)?;
    let size = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.len());
    eprintln!(
        "{}: {} tensors, {:.2} MB (the checkpoint: {} tensors, {:.2} MB)",
        out.display(),
        export.tensors.len(),
        size(out) as f64 / 1e6,
        ckpt.tensors.len(),
        size(checkpoint) as f64 / 1e6
    );
    Ok(())
}

/// Checks on the device that every tensor fits the U-Net the checkpoint describes (as `wgdiff
/// import` does), then writes the folder all or none.
fn export_diffusers(choice: AdapterChoice, checkpoint: &Path, out: &Path) -> Result<()> {
    if out.is_file() || wgdiff::fsio::list_dir(out).is_ok_and(|files| !files.is_empty()) {
        bail!(
            "--out {}: a diffusers export is a new folder, and this one exists and is not empty; choose another",
            out.display()
        );
    }
    let ckpt = read_checkpoint(checkpoint)?;
    let origin = checkpoint.display().to_string();
    let model = diffusers_export::export(&ckpt, &origin)?;
    TrainedModel::from_checkpoint(&super::open_gpu(choice)?, &ckpt, &origin, None)?;
    std::fs::create_dir_all(out).map_err(|e| anyhow::anyhow!("creating {}: {e}", out.display()))?;
    wgdiff::fsio::write_all_or_none(out, |staging| {
        let files = [
            (CONFIG_FILE, &model.config),
            (WEIGHTS_FILE, &model.weights),
            (SCHEDULER_FILE, &model.scheduler),
        ];
        for (name, bytes) in files {
            wgdiff::fsio::write_atomic(&staging.join(name), bytes)?;
        }
        Ok(files.map(|(name, _)| name.to_string()).to_vec())
    })?;
    for note in &model.notes {
        eprintln!("note: {note}");
    }
    eprintln!(
        "{}: a diffusers UNet2DModel ({CONFIG_FILE}, {WEIGHTS_FILE} {:.2} MB) and DDPMScheduler ({SCHEDULER_FILE}); \
         in Python: UNet2DModel.from_pretrained(\"{0}\"), DDPMScheduler.from_pretrained(\"{0}\")",
        out.display(),
        model.weights.len() as f64 / 1e6,
    );
    Ok(())
}
