//! `wgdiff import diffusers DIR --out FILE`: a diffusers `UNet2DModel` folder (and its scheduler
//! config) as one wgdiff sampling checkpoint, for the web page, which reads single files.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use wgdiff::pipeline::{diffusers, TrainedModel};
use wgdiff::AdapterChoice;

/// What `wgdiff import` reads.
#[derive(Subcommand)]
pub enum ImportCommand {
    /// A Hugging Face diffusers UNet2DModel folder (config.json, diffusion_pytorch_model.safetensors,
    /// scheduler_config.json beside it or in ../scheduler/), or a pipeline folder with unet/ and
    /// scheduler/. sample, eval and the app also read such a folder directly; the page needs the file
    Diffusers(ImportDiffusersArgs),
}

/// Flags of `wgdiff import diffusers`.
#[derive(Args)]
pub struct ImportDiffusersArgs {
    /// The model folder
    dir: PathBuf,
    /// The checkpoint to write (.safetensors)
    #[arg(long)]
    out: PathBuf,
}

/// Converts, checks that every tensor fits the U-Net it describes (on the device), then writes.
pub fn run(choice: AdapterChoice, command: ImportCommand) -> Result<()> {
    let ImportCommand::Diffusers(args) = command;
    if args.out.extension().is_none_or(|e| e != "safetensors") {
        bail!(
            "--out {}: a wgdiff checkpoint is a .safetensors file",
            args.out.display()
        );
    }
    let ckpt = diffusers::read_folder(&args.dir)?;
    let gpu = super::open_gpu(choice)?;
    let model = TrainedModel::from_checkpoint(&gpu, &ckpt, &args.dir.display().to_string(), None)?;
    ckpt.save(&args.out)?;
    let [c, h, w] = model.image_shape();
    let parameters: usize = model.net.named_params().iter().map(|(_, t)| t.numel()).sum();
    eprintln!(
        "{}: {} of {parameters} parameters for {c}x{h}x{w} images; process {:?}",
        args.out.display(),
        model.state.model.kind_name(),
        model.state.process
    );
    Ok(())
}
