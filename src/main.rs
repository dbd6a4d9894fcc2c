//! The `wgdiff` command line: device info, benchmarks and the per-op profiler (training,
//! sampling and the experiments arrive as further subcommands).

use anyhow::Result;
use clap::{Parser, Subcommand};
use commands::bench::BenchCommand;
use std::path::PathBuf;
use std::process::ExitCode;
use wgdiff::profile::{ModelSetup, Workload};
use wgdiff::AdapterChoice;

mod commands;

#[derive(Parser)]
#[command(name = "wgdiff", version, about = "A portable diffusion-model lab on wgpu compute shaders", long_about = None)]
struct Cli {
    /// Graphics backend: vulkan, metal, dx12, gl or webgpu (default: best available; also WGPU_BACKEND)
    #[arg(long, global = true)]
    backend: Option<String>,
    /// Use the adapter whose name contains this text, e.g. llvmpipe (also WGPU_ADAPTER_NAME)
    #[arg(long, global = true)]
    adapter: Option<String>,
    /// Choose every kernel by a fixed rule instead of timing the candidates (and ignore the
    /// autotune cache): bit-identical results from run to run on one adapter, perhaps slower
    #[arg(long, global = true, env = "WGDIFF_DETERMINISTIC", value_parser = clap::builder::FalseyValueParser::new())]
    deterministic: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a diffusion model (no flags: the class-conditional MLP on assets/mnist for 5 min);
    /// Ctrl-C or SIGTERM writes a checkpoint after the current step (exit status 130; another
    /// signal 2 s or more later quits at once, without it)
    Train(commands::train::TrainArgs),
    /// Train the MNIST classifier whose features give MNIST-FID (--eval: accuracy and MNIST-FID of a checkpoint)
    TrainClassifier(commands::train_classifier::TrainClassifierArgs),
    /// Draw images from a trained checkpoint (no flags: the model shipped in assets/models)
    Sample(commands::sample::SampleArgs),
    /// Write a checkpoint's EMA weights alone (what sampling needs: a quarter of the file, for
    /// the web page or sharing; sample, eval, the app and train --init read it), or with
    /// --format diffusers a U-Net as a diffusers UNet2DModel folder
    Export(commands::export::ExportArgs),
    /// Convert a model from another tool's layout into a wgdiff checkpoint (diffusers: a
    /// UNet2DModel folder with its scheduler config)
    Import {
        #[command(subcommand)]
        what: commands::import::ImportCommand,
    },
    /// Prune (random or L1, in a scope of the U) and/or quantise (int8, int4) a checkpoint's
    /// conv and linear weights; sample, eval, the app and train --init read the result, and
    /// conv and linear layers run int8/int4 weights in their own kernels
    Compress(commands::compress::CompressArgs),
    /// FID/KID of a checkpoint's samples against a dataset split (no flags: the shipped model,
    /// 1000 samples, MNIST-FID against mnist/test; --inception PATH: FID proper and IS)
    Eval(commands::eval::EvalArgs),
    /// Regenerate a published study's tables end to end (adaptive-skip: the adaptive U-Net paper)
    Experiment {
        #[command(subcommand)]
        what: commands::experiment::ExperimentCommand,
    },
    /// List every adapter found, the one chosen, its features and limits
    Info,
    /// Open the app: watch a model denoise step by step, skip schedules, live training, the
    /// profiler's table and roofline, the device (needs a display; feature `gui`)
    #[cfg(feature = "gui")]
    Gui(commands::gui::GuiArgs),
    /// Measure kernel speed (medians of interleaved runs; a table, or JSON lines with --json)
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// Print a model's layers, output shapes and parameter counts (like torchinfo)
    Model {
        /// Model preset: mnist, mnist-small, cifar10, tiny, ncsn-mnist
        #[arg(long, default_value = "mnist")]
        preset: String,
        /// Batch size of the output shapes shown
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// Print one JSON document (config, layers, totals) instead of the table
        #[arg(long)]
        json: bool,
    },
    /// Time every kernel dispatch of a training or sampling step, per op, against the device's
    /// measured roof: what bounds each op (FMAs, memory, dispatches) and the share of that bound
    /// it reaches (a table, --json, a Chrome trace, a roofline PNG)
    Profile {
        /// What to run: unet (a model preset's training step), sample (its network call without
        /// gradients, one sampling step), resblocks, mlp or matmul [default: unet]
        workload: Option<Workload>,
        /// Model preset of the unet and sample workloads
        #[arg(long, default_value = "mnist")]
        preset: String,
        /// Images per step of the unet and sample workloads [default: 64 for unet, 16 for sample]
        #[arg(long)]
        batch: Option<usize>,
        /// The sample workload calls this checkpoint's model instead of the preset's (a wgdiff
        /// checkpoint, a `wgdiff compress` one in its int8/int4 kernels, or a diffusers folder)
        #[arg(long, value_name = "PATH")]
        checkpoint: Option<PathBuf>,
        /// Profiled steps in the table (after a first step, profiled apart: what each kernel's
        /// first use cost, where a driver compiles it)
        #[arg(long, default_value_t = 3, value_parser = commands::at_least_one)]
        steps: usize,
        /// Print one JSON object per op row instead of the table
        #[arg(long)]
        json: bool,
        /// Also write every dispatch to this file in Chrome trace format (chrome://tracing, Perfetto)
        #[arg(long, value_name = "PATH")]
        trace: Option<PathBuf>,
        /// Also write a roofline PNG here, under the device's roof that every profile measures
        /// (bench mac's probes: GFLOP/s of f32 FMAs from registers, GB/s of lane-contiguous vec4
        /// storage reads): each op with counted FLOPs at (FLOP/byte, achieved GFLOP/s), circle
        /// area = its share of device time. Left of the ridge an op can at best reach the sloped
        /// roof (bandwidth bound), right of it the flat one (compute bound); an op far below its
        /// roof loses time elsewhere (launches, occupancy, loads its kernel repeats)
        #[arg(long, value_name = "PNG")]
        roofline: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    wgdiff::gpu::quiet_display_probes();
    // `wgdiff` alone (and `cargo run --release`) is `wgdiff train` with the defaults.
    let cli = match std::env::args().len() {
        1 => Cli::parse_from(["wgdiff", "train"]),
        _ => Cli::parse(),
    };
    let choice = AdapterChoice {
        backend: cli.backend.clone(),
        adapter: cli.adapter.clone(),
        without: wgpu::Features::empty(),
    }
    .or_env();
    commands::use_deterministic_kernels(cli.deterministic);
    match run(cli.command, choice) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<commands::Interrupted>().is_some() => {
            ExitCode::from(commands::INTERRUPTED_STATUS)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command, choice: AdapterChoice) -> Result<()> {
    match command {
        Command::Info => commands::info::run(choice),
        Command::Export(args) => commands::export::run(choice, args),
        Command::Import { what } => commands::import::run(choice, what),
        Command::Compress(args) => commands::compress::run(choice, args),
        #[cfg(feature = "gui")]
        Command::Gui(args) => commands::gui::run(choice, args),
        Command::Profile {
            workload,
            preset,
            batch,
            checkpoint,
            steps,
            json,
            trace,
            roofline,
        } => {
            let workload = workload.unwrap_or(Workload::DEFAULT);
            let batch = batch.unwrap_or(workload.default_batch());
            if checkpoint.is_some() && workload != Workload::Sample {
                anyhow::bail!("--checkpoint is for the sample workload (`wgdiff profile sample --checkpoint PATH`); {} builds its preset's model", workload.name());
            }
            commands::profile::run(
                choice,
                workload,
                &ModelSetup {
                    preset,
                    batch,
                    checkpoint,
                },
                steps,
                json,
                trace.as_deref(),
                roofline.as_deref(),
            )
        }
        Command::Train(args) => commands::train::run(choice, args),
        Command::TrainClassifier(args) => commands::train_classifier::run(&commands::open_gpu(choice)?, args),
        Command::Sample(args) => commands::sample::run(&commands::open_gpu(choice)?, args),
        Command::Eval(args) => commands::eval::run(&commands::open_gpu(choice)?, args),
        Command::Experiment { what } => commands::experiment::run(&commands::open_gpu(choice)?, what),
        Command::Model { preset, batch, json } => {
            commands::model::run(&commands::open_gpu(choice)?, &preset, batch, json)
        }
        Command::Bench { what } => commands::bench::run(choice, what),
    }
}
