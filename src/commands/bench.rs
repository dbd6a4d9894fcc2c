//! `wgdiff bench conv|block|matmul|mac|train|step`: interleaved timings of kernel variants and
//! model steps, printed as a table (plus the ratios the issues' targets are about) or JSON lines.

use super::bench_torch::{TorchDevice, TorchPeer};
use super::distributed::{Distributed, Job};
use super::print_tuner;
use anyhow::{Context, Result};
use clap::Subcommand;
use std::path::PathBuf;
use std::sync::Arc;
use wgdiff::bench::conv::{ConvPass, ConvVariant};
use wgdiff::bench::Peer;
use wgdiff::gpu::{describe, DeviceSet};
use wgdiff::pipeline::diffusers::is_diffusers_folder;
use wgdiff::pipeline::TrainedModel;
use wgdiff::train::TrainConfig;
use wgdiff::AdapterChoice;

/// How a bench repeats its cases and prints them: the flags every `wgdiff bench` table shares.
#[derive(clap::Args, Clone, Copy)]
pub struct Repeat {
    /// Timed repetitions per case (the median is reported) [default: 3 for train, 7 for mac and
    /// matmul, 5 for the others]
    #[arg(long, value_parser = super::at_least_one)]
    reps: Option<usize>,
    /// Untimed runs per case before timing
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Print one JSON object per measurement instead of the table
    #[arg(long)]
    json: bool,
}

impl Repeat {
    /// The timed repetitions: as given, else this bench's `default`.
    fn reps(&self, default: usize) -> usize {
        self.reps.unwrap_or(default)
    }
}

/// PyTorch beside wgdiff: the flags of the benches that have a PyTorch twin.
#[derive(clap::Args, Clone)]
pub struct BesideTorch {
    /// PyTorch runs the same workloads in the same rounds (for train: its twin of the preset,
    /// the f32 training step and the sampling step without skips; mnist has one): a row each
    /// and, on wgdiff's rows, wgdiff's speed over PyTorch's (`vs torch`; `vs_torch` in --json).
    /// Optionally the Python to use, one with torch [default: python3]
    #[arg(long, value_name = "PYTHON", num_args = 0..=1, default_missing_value = "python3")]
    beside_torch: Option<PathBuf>,
    /// Where PyTorch runs: cpu (the default), cuda (f32 with TF32 off, the arithmetic of
    /// wgdiff's f32 kernels) or cuda-bf16 (bf16, for reference); a GPU needs a CUDA build of
    /// torch
    #[arg(long, value_enum, value_name = "DEVICE", requires = "beside_torch")]
    torch_device: Option<TorchDevice>,
}

impl BesideTorch {
    /// The PyTorch helper, started, when --beside-torch was given.
    fn start(&self) -> Result<Option<TorchPeer>> {
        self.beside_torch
            .as_ref()
            .map(|python| TorchPeer::start(python, self.torch_device.unwrap_or_default()))
            .transpose()
            .map_err(Into::into)
    }
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Every conv implementation (forward, forward+backward) on the convs of a 32x32 U-Net
    /// (batch 16), beside a matmul of the same GEMM size
    Conv {
        /// Implementations: naive, im2col, tiled, direct, winograd, depthwise7, auto, and on packed integer
        /// weights (forward only) tiled-int8, winograd-int8, auto-int8 and the same with int4
        /// (Winograd dequantises the weights for the call; auto times the two)
        /// (comma-separated; default all)
        #[arg(long, value_delimiter = ',')]
        variants: Vec<String>,
        /// Passes, comma-separated: forward, input-grad, weight-grad (each backward pass
        /// alone), forward+backward (or backward: the forward, both backward passes and the
        /// bias's gradient, as a training step runs them), both (forward and forward+backward)
        /// or all
        #[arg(long, default_value = "both")]
        pass: String,
        #[command(flatten)]
        torch: BesideTorch,
        #[command(flatten)]
        repeat: Repeat,
    },
    /// The ConvNeXt block fused (three kernels) vs unfused (composed ops), forward and
    /// forward+backward, on the speed ladder's shapes (B32 C32 28x28, B32 C64 14x14)
    Block {
        /// Shapes as BxCxHxW, comma-separated (default: 32x32x28x28,32x64x14x14)
        #[arg(long, value_delimiter = ',')]
        shapes: Vec<String>,
        #[command(flatten)]
        repeat: Repeat,
    },
    /// A training step of a model preset (img/s, GFLOP/s) and a sampling step for every
    /// number of skipped U-Net levels (ms, dispatches), interleaved; then the peak device
    /// memory the buffer pool held and the process's peak RSS
    Train {
        /// Model preset (see `wgdiff model`)
        #[arg(long, default_value = "mnist")]
        preset: String,
        /// Images per training step
        #[arg(long, default_value_t = 64)]
        batch: usize,
        /// Images per sampling step
        #[arg(long, default_value_t = 16)]
        sample_batch: usize,
        /// f16: also time a mixed-precision training step (as `wgdiff train --precision f16`)
        /// beside the f32 one
        #[arg(long, default_value = "f32")]
        precision: wgdiff::train::Precision,
        #[command(flatten)]
        torch: BesideTorch,
        #[command(flatten)]
        repeat: Repeat,
        /// Data-parallel scaling instead: real training steps (`wgdiff train`'s trainer, MNIST
        /// from assets/mnist, global --batch) on one device against this many replicas (as
        /// `wgdiff train --devices`), alternating; prints img/s of both, the scaling efficiency
        /// (img/s at N / (N x img/s at 1)) and the all-reduce's share of a step
        #[arg(long, value_name = "all|N|NAME,NAME")]
        devices: Option<DeviceSet>,
        /// Scaling over the processes of an MPI job: `mpirun -n P wgdiff bench train
        /// --distributed mpi [--devices D]` compares one device of rank 0 with P x D replicas
        #[arg(long, value_enum)]
        distributed: Option<Distributed>,
    },
    /// One sampling step (the network call and a DDIM update) of a checkpoint's model at each
    /// batch size, in rounds; with --beside-diffusers, diffusers' step on PyTorch's CPU in the
    /// same rounds (the checkpoint then a diffusers folder) and their ratio per round
    Step {
        /// The model: a wgdiff checkpoint or a diffusers folder
        #[arg(long, default_value = wgdiff::pipeline::DEFAULT_CHECKPOINT)]
        checkpoint: PathBuf,
        /// Batch sizes, comma-separated
        #[arg(long, value_delimiter = ',', default_value = "1,16")]
        batches: Vec<usize>,
        #[command(flatten)]
        repeat: Repeat,
        /// A Python with torch and diffusers (e.g. a venv's bin/python): time diffusers' step
        /// beside wgdiff's, round by round
        #[arg(long, value_name = "PYTHON")]
        beside_diffusers: Option<PathBuf>,
        /// Where diffusers runs: cpu (the default), cuda (f32 with TF32 off) or cuda-bf16 (the
        /// model in bf16, for reference)
        #[arg(long, value_enum, value_name = "DEVICE", requires = "beside_diffusers")]
        torch_device: Option<TorchDevice>,
    },
    /// The app's training job against `wgdiff train` on the same settings (the library's
    /// recipe unless --set), in alternating rounds: steps per second of each and their ratio,
    /// and the app's frame intervals while it trains. Opens the app's window, so it needs a
    /// display (headless: scripts/bench-app.sh runs it under Xvfb)
    App(super::bench_app::BenchAppArgs),
    /// A long app session, checked for leaks: the train view training (sample grids and
    /// MNIST-FID every few minutes), then the denoise view sampling run after run, each with a
    /// soak log (a line a minute: resident memory, the buffer pool's bytes, frame times); fails
    /// when memory grows after settling, the pool does not return to its plateau, or frames
    /// miss the target. Needs a display (headless: scripts/soak.sh runs it under Xvfb)
    Soak(super::bench_soak::BenchSoakArgs),
    /// The adapter's roof, interleaved: multiply-accumulate throughput in f32 FMAs (the float
    /// kernels' arithmetic), int8 words unpacked to f32 (the packed-weight kernels') and
    /// dot4I8Packed on int8 x int8 (int8 arithmetic can only make a kernel faster where dot4-i8
    /// beats fma-f32); then what bounds a kernel besides its FMAs: storage-buffer reads
    /// (lane-contiguous vec4s streamed from 64 MiB and from a cached 256 KiB, and the
    /// implicit-GEMM conv's gather of f32s), workgroup-memory reads, the cost of an empty
    /// dispatch and of a submit, and reads the engine's kernels do not make yet (rgba32float
    /// texels, a 64 KiB uniform array). The lines under the table say how many f32 products per
    /// f32 read a kernel needs before FMAs, not loads, bound it
    Mac {
        #[command(flatten)]
        repeat: Repeat,
    },
    /// GFLOP/s of the naive and the blocked matmul kernels on square and skinny shapes
    Matmul {
        /// Shapes as MxNxK, comma-separated (default: 256,512,1024 square and 4096x64x576)
        #[arg(long, value_delimiter = ',')]
        shapes: Vec<String>,
        /// Only these variants, comma-separated (default: all): naive, blocked (the autotuner's
        /// form), blocked-storage and blocked-texels (the fixed rule's tile reading its operands
        /// from storage buffers or as rgba32float texels), blocked-f16, blocked-int8, blocked-int4
        #[arg(long, value_delimiter = ',')]
        variants: Vec<String>,
        #[command(flatten)]
        torch: BesideTorch,
        #[command(flatten)]
        repeat: Repeat,
    },
}

/// Runs one benchmark on the device `choice` picks (the devices of `--devices` for scaling).
pub fn run(choice: AdapterChoice, what: BenchCommand) -> Result<()> {
    if let BenchCommand::Train {
        preset,
        batch,
        repeat,
        devices,
        distributed,
        torch,
        ..
    } = &what
    {
        if torch.beside_torch.is_some() && !wgdiff::bench::train::TORCH_TWINS.contains(&preset.as_str()) {
            anyhow::bail!(
                "--beside-torch: PyTorch has no twin of preset {preset} ({} has one: scripts/torch_bench.py)",
                wgdiff::bench::train::TORCH_TWINS.join(", ")
            );
        }
        if devices.is_some() || distributed.is_some() {
            if torch.beside_torch.is_some() {
                anyhow::bail!(
                    "--beside-torch times one device's step; leave out --devices and --distributed"
                );
            }
            let job = Job::join(*distributed)?;
            let set = devices.clone().unwrap_or_default();
            let result = scaling(choice, &job, &set, preset, *batch, repeat);
            return job.finish(result);
        }
    }
    let gpu = &super::open_gpu(choice.clone())?;
    let json = match &what {
        BenchCommand::Conv { repeat, .. }
        | BenchCommand::Block { repeat, .. }
        | BenchCommand::Train { repeat, .. }
        | BenchCommand::Matmul { repeat, .. }
        | BenchCommand::Mac { repeat, .. }
        | BenchCommand::Step { repeat, .. } => repeat.json,
        BenchCommand::App(args) => args.json,
        BenchCommand::Soak(args) => args.json,
    };
    if !json {
        eprintln!("device: {}", describe(&gpu.info));
    }
    match what {
        BenchCommand::App(args) => super::bench_app::run(&choice, args),
        BenchCommand::Soak(args) => super::bench_soak::run(&choice, args),
        BenchCommand::Conv {
            variants,
            pass,
            torch,
            repeat,
        } => {
            let chosen = if variants.is_empty() {
                ConvVariant::all()
            } else {
                variants
                    .iter()
                    .map(|v| ConvVariant::from_name(v))
                    .collect::<Result<_, _>>()?
            };
            let passes = ConvPass::parse_list(&pass)?;
            let mut torch = torch.start()?;
            let rows = wgdiff::bench::conv::run(
                gpu,
                &wgdiff::bench::conv::default_shapes(),
                &chosen,
                &passes,
                repeat.warmup,
                repeat.reps(5),
                torch.as_mut().map(|t| t as &mut dyn Peer),
            )?;
            print_rows(&rows, json);
            if !json {
                print_conv_summary(&rows);
                print_tuner(gpu);
            }
            Ok(())
        }
        BenchCommand::Block { shapes, repeat } => {
            let shapes = if shapes.is_empty() {
                wgdiff::bench::block::DEFAULT_SHAPES.to_vec()
            } else {
                shapes.iter().map(|s| parse_bchw(s)).collect::<Result<_>>()?
            };
            let rows = wgdiff::bench::block::run(gpu, &shapes, repeat.warmup, repeat.reps(5))?;
            print_rows(&rows, json);
            if !json {
                print_block_summary(&rows);
            }
            Ok(())
        }
        BenchCommand::Train {
            preset,
            batch,
            sample_batch,
            precision,
            torch,
            repeat,
            ..
        } => {
            if let Some(warning) = precision.fallback_warning(gpu) {
                eprintln!("{warning}");
            }
            let mut torch = torch.start()?;
            let steps = wgdiff::bench::train::Steps {
                preset: &preset,
                batch,
                sample_batch,
                precision,
            };
            let peer = torch.as_mut().map(|t| t as &mut dyn Peer);
            let (rows, counts) = wgdiff::bench::train::run(gpu, steps, repeat.warmup, repeat.reps(3), peer)?;
            print_rows(&rows, json);
            if !json {
                print_train_summary(&rows, &counts, batch);
            }
            Ok(())
        }
        BenchCommand::Step {
            checkpoint,
            batches,
            repeat,
            beside_diffusers,
            torch_device,
        } => {
            if batches.contains(&0) {
                anyhow::bail!("--batches: every batch size must be at least 1");
            }
            let model = TrainedModel::load(gpu, &checkpoint)?;
            let mut helper = match &beside_diffusers {
                Some(python) => {
                    if !is_diffusers_folder(&checkpoint) {
                        anyhow::bail!(
                            "--beside-diffusers: --checkpoint {} must be a diffusers folder for diffusers to load \
                             (wgdiff export --format diffusers writes one)",
                            checkpoint.display()
                        );
                    }
                    Some(super::bench_step::DiffusersStep::start(
                        python,
                        &checkpoint,
                        torch_device.unwrap_or_default(),
                    )?)
                }
                None => None,
            };
            let about = helper.as_ref().map(|h| h.about().to_string());
            let mut time_diffusers = helper.as_mut().map(|h| move |batch: usize| h.step(batch));
            let other = time_diffusers
                .as_mut()
                .zip(about.as_deref())
                .map(|(step, device)| wgdiff::bench::step::Other {
                    name: "diffusers",
                    device,
                    step,
                });
            let (rows, measurements) = wgdiff::bench::step::run(
                gpu,
                model.net.as_ref(),
                model.image_shape(),
                &batches,
                repeat.warmup,
                repeat.reps(5),
                other,
            )?;
            print_rows(&measurements, json);
            if !json {
                print_step_summary(&rows, about.as_deref());
            }
            Ok(())
        }
        BenchCommand::Mac { repeat } => {
            let rows = wgdiff::bench::mac::run(gpu, repeat.warmup, repeat.reps(7))?;
            print_rows(&rows, json);
            if !json {
                for line in wgdiff::bench::mac::summary(&rows) {
                    println!("{line}");
                }
            }
            Ok(())
        }
        BenchCommand::Matmul {
            shapes,
            variants,
            torch,
            repeat,
        } => {
            let shapes = if shapes.is_empty() {
                wgdiff::bench::matmul::DEFAULT_SHAPES.to_vec()
            } else {
                shapes.iter().map(|s| parse_mnk(s)).collect::<Result<_>>()?
            };
            let mut torch = torch.start()?;
            let peer = torch.as_mut().map(|t| t as &mut dyn Peer);
            let rows =
                wgdiff::bench::matmul::run(gpu, &shapes, &variants, repeat.warmup, repeat.reps(7), peer)?;
            print_rows(&rows, json);
            if !json {
                for w in rows
                    .windows(2)
                    .filter(|w| w[0].shape == w[1].shape && w[0].variant == "naive")
                {
                    println!(
                        "{}: blocked is {:.1}x naive",
                        w[0].shape,
                        w[0].median_ms / w[1].median_ms
                    );
                }
                print_tuner(gpu);
            }
            Ok(())
        }
    }
}

/// The step table: each batch size's median milliseconds and, beside diffusers, their ratio.
fn print_step_summary(rows: &[wgdiff::bench::step::StepRow], other: Option<&str>) {
    let Some(other) = other else {
        return;
    };
    println!("\n| batch | wgdiff ms/step | {other}: ms/step | diffusers / wgdiff (median of rounds) |");
    println!("|---:|---:|---:|---:|");
    for r in rows {
        if let (Some(other), Some(ratio)) = (r.other_ms, r.other_over_wgdiff) {
            println!("| {} | {:.1} | {other:.1} | {ratio:.2} |", r.batch, r.wgdiff_ms);
        }
    }
}

/// Ratios the conv acceptance figures are about, per shape: auto vs naive forward,
/// auto forward+backward vs its forward, auto forward vs the same-size matmul.
fn print_conv_summary(rows: &[wgdiff::bench::Measurement]) {
    let find = |shape: &str, variant: &str, pass: &str| {
        rows.iter()
            .find(|r| r.shape == shape && r.variant == variant && r.pass.as_deref() == Some(pass))
            .map(|r| r.median_ms)
    };
    let mut shapes: Vec<&str> = rows.iter().map(|r| r.shape.as_str()).collect();
    shapes.dedup();
    for shape in shapes {
        let mut parts = Vec::new();
        if let (Some(naive), Some(auto)) = (find(shape, "naive", "forward"), find(shape, "auto", "forward")) {
            parts.push(format!("auto {:.1}x faster than naive", naive / auto));
        }
        if let (Some(fb), Some(f)) = (
            find(shape, "auto", "forward+backward"),
            find(shape, "auto", "forward"),
        ) {
            parts.push(format!("auto forward+backward = {:.2}x its forward", fb / f));
        }
        if let (Some(mm), Some(auto)) = (find(shape, "matmul", "forward"), find(shape, "auto", "forward")) {
            parts.push(format!(
                "auto reaches {:.0}% of the same-size matmul",
                100.0 * mm / auto
            ));
        }
        if !parts.is_empty() {
            println!("{shape}: {}", parts.join("; "));
        }
    }
}

fn print_rows(rows: &[wgdiff::bench::Measurement], json: bool) {
    if json {
        println!("{}", wgdiff::bench::json_lines(rows));
    } else {
        print!("{}", wgdiff::bench::table(rows));
    }
}

/// The sizes of shape `s` ("AxBxC"), each at least 1; `example` shows the form.
fn parse_sizes(s: &str, example: &str) -> Result<Vec<usize>> {
    let parts: Vec<usize> = s
        .split('x')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("shape \"{s}\" should look like {example}"))?;
    if parts.contains(&0) {
        anyhow::bail!("shape \"{s}\" has a size of 0: every size is at least 1 (e.g. {example})");
    }
    Ok(parts)
}

fn parse_mnk(s: &str) -> Result<(usize, usize, usize)> {
    let parts = parse_sizes(s, "1024x1024x1024 (MxNxK)")?;
    match parts[..] {
        [m, n, k] => Ok((m, n, k)),
        [s] => Ok((s, s, s)),
        _ => anyhow::bail!("shape \"{s}\" should look like 1024x1024x1024 (MxNxK)"),
    }
}

fn parse_bchw(s: &str) -> Result<[usize; 4]> {
    let parts = parse_sizes(s, "16x64x32x32 (BxCxHxW)")?;
    <[usize; 4]>::try_from(parts)
        .map_err(|_| anyhow::anyhow!("shape \"{s}\" should look like 16x64x32x32 (BxCxHxW)"))
}

/// "fused is X.Xx faster than unfused" per shape and pass.
fn print_block_summary(rows: &[wgdiff::bench::Measurement]) {
    for fused in rows.iter().filter(|r| r.variant == "fused") {
        if let Some(unfused) = rows
            .iter()
            .find(|r| r.variant == "unfused" && r.shape == fused.shape && r.pass == fused.pass)
        {
            println!(
                "{} {}: fused is {:.1}x faster than unfused",
                fused.shape,
                fused.pass.as_deref().unwrap_or("forward"),
                unfused.median_ms / fused.median_ms
            );
        }
    }
}

/// `bench train --devices/--distributed`: one replica against all, then the table (rank 0).
fn scaling(
    choice: AdapterChoice,
    job: &Job,
    devices: &DeviceSet,
    preset: &str,
    batch: usize,
    repeat: &Repeat,
) -> Result<()> {
    let (warmup, reps, json) = (repeat.warmup, repeat.reps(3), repeat.json);
    let gpus = super::open_gpus(choice, devices)?;
    let config = TrainConfig {
        preset: preset.to_string(),
        batch,
        ..TrainConfig::default()
    };
    let image_shape = wgdiff::train::run_image_shape(&config, None)?;
    let data = wgdiff::train::load_data(&config.data, image_shape)?;
    let measured = pollster::block_on(wgdiff::bench::scaling::run(
        config,
        Arc::new(data),
        &gpus,
        job.collective(),
        warmup,
        reps,
    ))?;
    let Some(s) = measured else {
        return Ok(());
    };
    if json {
        println!("{}", serde_json::to_string(&s)?);
        return Ok(());
    }
    let (_, ranks) = job.place();
    println!(
        "device: {}; {} replicas = {ranks} process(es) x {} device(s); {preset}, global batch {batch}, median of {reps}",
        describe(&gpus[0].info),
        s.all.replicas,
        gpus.len()
    );
    println!(
        "{:<10} {:>12} {:>10} {:>18}",
        "replicas", "ms/step", "img/s", "all-reduce ms"
    );
    for row in [&s.one, &s.all] {
        println!(
            "{:<10} {:>12.1} {:>10.2} {:>18}",
            row.replicas,
            row.median_ms,
            row.img_per_s,
            row.reduce_ms.map_or("-".into(), |ms| format!("{ms:.1}"))
        );
    }
    println!(
        "scaling efficiency {:.2} (img/s at {} / ({} x img/s at 1)); the all-reduce takes {:.1}% of a step",
        s.efficiency,
        s.all.replicas,
        s.all.replicas,
        100.0 * s.reduce_share
    );
    Ok(())
}

/// Training img/s and GFLOP/s, and each skip count's sampling step against skip 0.
fn print_train_summary(
    rows: &[wgdiff::bench::Measurement],
    counts: &wgdiff::bench::train::TrainBenchCounts,
    batch: usize,
) {
    for train in rows.iter().filter(|r| r.variant.starts_with("train-step")) {
        println!(
            "{}: {:.2} img/s, {:.2} GFLOP/s ({:.3} GFLOP per image counted by the kernels)",
            train.variant,
            batch as f64 / (train.median_ms / 1e3),
            counts.train_flops / 1e9 / (train.median_ms / 1e3),
            counts.train_flops / 1e9 / batch as f64
        );
    }
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    println!(
        "memory: peak device bytes held by the buffer pool {:.1} MiB (peak live {:.1} MiB); peak RSS {}",
        mib(counts.pool.peak_held_bytes),
        mib(counts.pool.peak_live_bytes),
        counts
            .peak_rss_bytes
            .map_or("not reported by this OS".to_string(), |b| format!(
                "{:.1} MiB",
                mib(b)
            ))
    );
    let sample: Vec<_> = rows
        .iter()
        .filter(|r| r.variant.starts_with("sample-step"))
        .collect();
    if let Some(base) = sample.first() {
        for (r, dispatches) in sample.iter().zip(&counts.sample_dispatches) {
            println!(
                "{}: {:.1} ms per sampling step, {dispatches} dispatches, {:.1}% faster than skip 0",
                r.variant,
                r.median_ms,
                100.0 * (1.0 - r.median_ms / base.median_ms)
            );
        }
    }
}
