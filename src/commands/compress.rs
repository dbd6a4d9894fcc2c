//! `wgdiff compress`: prunes and/or quantises a checkpoint's conv and linear weights into a
//! compressed sampling export that `sample`, `eval`, the app and `train --init` read.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use wgdiff::compress::{CompressPlan, PruneMethod, PrunePlan, PruneScope, QuantizePlan};
use wgdiff::ops::WeightBits;
use wgdiff::pipeline::{read_checkpoint, DEFAULT_CHECKPOINT};
use wgdiff::AdapterChoice;

/// Flags of `wgdiff compress`.
#[derive(Args)]
pub struct CompressArgs {
    /// The checkpoint to compress (`wgdiff train`, `export`, a fine-tuned pruned one, or a
    /// diffusers folder)
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    checkpoint: PathBuf,
    /// The compressed checkpoint to write (.safetensors; never the input)
    #[arg(long)]
    out: PathBuf,
    /// Unstructured pruning: random (a random subset) or l1 (the smallest |w|)
    #[arg(long, value_name = "METHOD")]
    prune: Option<PruneMethod>,
    /// Fraction of the scope's weights pruned, e.g. 0.3
    #[arg(long, requires = "prune")]
    amount: Option<f64>,
    /// Which weights are pruned: global (all conv and linear weights ranked together), middle
    /// (layers at a quarter of the image's side or less: the bottom of the U), ends (the outer
    /// levels), layer (each tensor by the amount on its own)
    #[arg(long, default_value = "global", requires = "prune")]
    scope: PruneScope,
    /// Store conv and linear weights as int8 or int4 (two per byte) with a scale per tensor;
    /// conv and linear layers then run them in the int8/int4 kernels
    #[arg(long, value_name = "BITS")]
    quantize: Option<WeightBits>,
    /// One scale per output channel instead of per tensor
    #[arg(long, requires = "quantize")]
    per_channel: bool,
    /// Seed of random pruning
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// Compresses `--checkpoint` into `--out` (atomically) and prints what it did and the sizes.
pub fn run(choice: AdapterChoice, args: CompressArgs) -> Result<()> {
    if args.out.extension().is_none_or(|e| e != "safetensors") {
        bail!(
            "--out {}: a compressed checkpoint is a .safetensors file",
            args.out.display()
        );
    }
    if wgdiff::fsio::same_file(&args.checkpoint, &args.out) {
        bail!(
            "--out {} is the checkpoint itself; write the compressed copy to another file",
            args.out.display()
        );
    }
    let prune = match (args.prune, args.amount) {
        (Some(method), Some(amount)) => Some(PrunePlan {
            method,
            amount,
            scope: args.scope,
        }),
        (Some(_), None) => bail!("--prune needs --amount, the fraction of weights to prune (e.g. 0.3)"),
        _ => None,
    };
    let quantize = args.quantize.map(|bits| QuantizePlan {
        bits,
        per_channel: args.per_channel,
    });
    if prune.is_none() && quantize.is_none() {
        bail!("nothing to do: give --prune random|l1 --amount P, --quantize int8|int4, or both");
    }
    let plan = CompressPlan {
        prune,
        quantize,
        seed: args.seed,
    };
    let gpu = super::open_gpu(choice)?;
    let origin = args.checkpoint.display().to_string();
    let ckpt = read_checkpoint(&args.checkpoint)?;
    let (out, summary) = wgdiff::compress::compress_checkpoint(&gpu, &ckpt, &origin, &plan)
        .with_context(|| format!("compressing {origin}"))?;
    let bytes = out.to_bytes()?;
    wgdiff::fsio::write_atomic(&args.out, &bytes)?;
    if let Some(p) = plan.prune {
        println!(
            "pruned ({}, {} scope) {} of its {} weights ({:.1}%; the model has {} conv and linear weights)",
            format!("{:?}", p.method).to_lowercase(),
            format!("{:?}", p.scope).to_lowercase(),
            summary.pruned_elements,
            summary.scope_elements,
            100.0 * summary.pruned_elements as f64 / summary.scope_elements.max(1) as f64,
            summary.weight_elements
        );
    }
    if let Some(q) = plan.quantize {
        println!(
            "quantised {} weight tensors to {} ({}), largest error {:.2}% of a tensor's max |w|",
            summary.quantized_tensors,
            q.bits.name(),
            if q.per_channel {
                "a scale per output channel"
            } else {
                "a scale per tensor"
            },
            100.0 * summary.max_relative_error
        );
    }
    let export = wgdiff::run_state::sampling_export(&ckpt, &origin)?.to_bytes()?;
    println!(
        "{}: {} bytes, {} gzipped (the uncompressed EMA weights: {} bytes, {} gzipped)",
        args.out.display(),
        bytes.len(),
        wgdiff::compress::gzipped_len(&bytes),
        export.len(),
        wgdiff::compress::gzipped_len(&export)
    );
    Ok(())
}
