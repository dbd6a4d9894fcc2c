//! The `wgdiff` command line: device info, benchmarks and the per-op profiler (training,
//! sampling and the experiments arrive as further subcommands).

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use wgdiff::bench::conv::Passes;
use wgdiff::bench::profile::Workload;
use wgdiff::gpu::{describe, instance_for, list_adapters, rank};
use wgdiff::ops::ConvImpl;
use wgdiff::{AdapterChoice, Gpu};

#[derive(Parser)]
#[command(name = "wgdiff", version, about = "A portable diffusion-model lab on wgpu compute shaders", long_about = None)]
struct Cli {
    /// Graphics backend: vulkan, metal, dx12, gl or webgpu (default: best available; also WGPU_BACKEND)
    #[arg(long, global = true)]
    backend: Option<String>,
    /// Use the adapter whose name contains this text, e.g. llvmpipe (also WGPU_ADAPTER_NAME)
    #[arg(long, global = true)]
    adapter: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every adapter found, the one chosen, its features and limits
    Info,
    /// Measure kernel speed (medians of interleaved runs; a table, or JSON lines with --json)
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// Time every kernel dispatch of a training step, per op (a table, --json or a Chrome trace)
    Profile {
        /// What to run: resblocks, mlp or matmul (default: resblocks)
        workload: Option<Workload>,
        /// Profiled steps (after one unprofiled warm-up step)
        #[arg(long, default_value_t = 3)]
        steps: usize,
        /// Print one JSON object per op row instead of the table
        #[arg(long)]
        json: bool,
        /// Also write every dispatch to this file in Chrome trace format (chrome://tracing, Perfetto)
        #[arg(long, value_name = "PATH")]
        trace: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Every conv implementation (forward, forward+backward) on the convs of a 32x32 U-Net
    /// (batch 16), beside a matmul of the same GEMM size
    Conv {
        /// Implementations: naive, im2col, tiled, direct, auto (comma-separated; default all)
        #[arg(long, value_delimiter = ',')]
        variants: Vec<String>,
        /// forward, backward (= forward+backward) or both
        #[arg(long, default_value = "both")]
        pass: String,
        /// Timed repetitions per variant (the median is reported)
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Untimed runs per variant before timing
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Print one JSON object per measurement instead of the table
        #[arg(long)]
        json: bool,
    },
    /// The ConvNeXt block fused (two kernels) vs unfused (composed ops), forward and
    /// forward+backward, on U-Net-like shapes (B16 C64 32x32, B16 C128 16x16)
    Block {
        /// Shapes as BxCxHxW, comma-separated (default: 16x64x32x32,16x128x16x16)
        #[arg(long, value_delimiter = ',')]
        shapes: Vec<String>,
        /// Timed repetitions per variant (the median is reported)
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Untimed runs per variant before timing
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Print one JSON object per measurement instead of the table
        #[arg(long)]
        json: bool,
    },
    /// GFLOP/s of the naive and the blocked matmul kernels on square and skinny shapes
    Matmul {
        /// Shapes as MxNxK, comma-separated (default: 256,512,1024 square and 4096x64x576)
        #[arg(long, value_delimiter = ',')]
        shapes: Vec<String>,
        /// Only these variants (naive, blocked, blocked-f16), comma-separated (default: all)
        #[arg(long, value_delimiter = ',')]
        variants: Vec<String>,
        /// Timed repetitions per variant (the median is reported)
        #[arg(long, default_value_t = 7)]
        reps: usize,
        /// Untimed runs per variant before timing
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Print one JSON object per measurement instead of the table
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let choice = AdapterChoice {
        backend: cli.backend.clone(),
        adapter: cli.adapter.clone(),
        without: wgpu::Features::empty(),
    }
    .or_env();
    match run(cli.command, choice) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command, choice: AdapterChoice) -> Result<()> {
    match command {
        Command::Info => info(choice),
        Command::Profile {
            workload,
            steps,
            json,
            trace,
        } => profile(
            choice,
            workload.unwrap_or(Workload::DEFAULT),
            steps,
            json,
            trace.as_deref(),
        ),
        Command::Bench { what } => {
            let gpu = open_gpu(choice)?;
            match what {
                BenchCommand::Conv {
                    variants,
                    pass,
                    reps,
                    warmup,
                    json,
                } => {
                    let imps = if variants.is_empty() {
                        ConvImpl::ALL.to_vec()
                    } else {
                        variants
                            .iter()
                            .map(|v| ConvImpl::from_name(v))
                            .collect::<Result<_, _>>()?
                    };
                    let passes = match pass.as_str() {
                        "forward" => Passes::Forward,
                        "backward" | "forward+backward" => Passes::ForwardBackward,
                        "both" => Passes::Both,
                        other => anyhow::bail!("--pass {other}: use forward, backward or both"),
                    };
                    if !json {
                        eprintln!("device: {}", describe(&gpu.info));
                    }
                    let rows = wgdiff::bench::conv::run(
                        &gpu,
                        &wgdiff::bench::conv::default_shapes(),
                        &imps,
                        passes,
                        warmup,
                        reps,
                    )?;
                    print_rows(&rows, json);
                    if !json {
                        print_conv_summary(&rows);
                        print_tuner(&gpu);
                    }
                    Ok(())
                }
                BenchCommand::Block {
                    shapes,
                    reps,
                    warmup,
                    json,
                } => {
                    let shapes = if shapes.is_empty() {
                        wgdiff::bench::block::DEFAULT_SHAPES.to_vec()
                    } else {
                        shapes.iter().map(|s| parse_bchw(s)).collect::<Result<_>>()?
                    };
                    if !json {
                        eprintln!("device: {}", describe(&gpu.info));
                    }
                    let rows = wgdiff::bench::block::run(&gpu, &shapes, warmup, reps)?;
                    print_rows(&rows, json);
                    if !json {
                        print_block_summary(&rows);
                    }
                    Ok(())
                }
                BenchCommand::Matmul {
                    shapes,
                    variants,
                    reps,
                    warmup,
                    json,
                } => {
                    let shapes = if shapes.is_empty() {
                        wgdiff::bench::matmul::DEFAULT_SHAPES.to_vec()
                    } else {
                        shapes.iter().map(|s| parse_mnk(s)).collect::<Result<_>>()?
                    };
                    if !json {
                        eprintln!("device: {}", describe(&gpu.info));
                    }
                    let rows = wgdiff::bench::matmul::run(&gpu, &shapes, &variants, warmup, reps)?;
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
                        print_tuner(&gpu);
                    }
                    Ok(())
                }
            }
        }
    }
}

/// Opens the device with kernel choices remembered across runs in the user's cache folder.
fn open_gpu(choice: AdapterChoice) -> Result<Gpu> {
    let gpu = Gpu::new_blocking(choice)?;
    if let Some(path) = wgdiff::gpu::tuning_cache_path(&gpu.info) {
        gpu.tuner().use_cache_file(path);
    }
    Ok(gpu)
}

fn print_tuner(gpu: &Gpu) {
    println!("kernel choices measured by the autotuner:");
    for (key, choice) in gpu.tuner().snapshot() {
        println!("  {key:<50} {choice}");
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

fn profile(
    choice: AdapterChoice,
    workload: Workload,
    steps: usize,
    json: bool,
    trace: Option<&Path>,
) -> Result<()> {
    // Open the trace file first so a bad path fails before the run.
    let trace_file = trace
        .map(|p| {
            std::fs::File::create(p).with_context(|| format!("cannot write the trace file {}", p.display()))
        })
        .transpose()?;
    let gpu = open_gpu(choice)?;
    let log = |line: String| {
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    log(format!("device: {}", describe(&gpu.info)));
    log(format!(
        "workload: {} ({}), 1 warm-up step, {} profiled",
        Workload::ALL
            .iter()
            .find(|(_, w)| *w == workload)
            .map_or("?", |(n, _)| n),
        workload.describe(),
        steps.max(1)
    ));
    let profiles = wgdiff::bench::profile::run(&gpu, workload, steps)?;
    for (i, p) in profiles.iter().enumerate() {
        let wall_ms = p.wall_ns.unwrap_or(0.0) * 1e-6;
        let ops_ms = p.op_ns() * 1e-6;
        log(format!(
            "step {}: wall {wall_ms:.3} ms (synced before and after); sum of op times {ops_ms:.3} ms ({:.0}% of wall); \
             first op start to last op end {:.3} ms; {} dispatches",
            i + 1,
            100.0 * ops_ms / wall_ms.max(f64::MIN_POSITIVE),
            p.span_ns() * 1e-6,
            p.records.len()
        ));
    }
    let total = profiles
        .into_iter()
        .reduce(|mut all, p| {
            all.extend(p);
            all
        })
        .context("no step was profiled")?;
    if json {
        println!("{}", total.json_lines());
    } else {
        print!("{}", total.table());
    }
    if let (Some(mut file), Some(path)) = (trace_file, trace) {
        file.write_all(total.chrome_trace().as_bytes())
            .with_context(|| format!("cannot write the trace file {}", path.display()))?;
        log(format!("trace written to {}", path.display()));
    }
    Ok(())
}

fn print_rows(rows: &[wgdiff::bench::Measurement], json: bool) {
    if json {
        println!("{}", wgdiff::bench::json_lines(rows));
    } else {
        print!("{}", wgdiff::bench::table(rows));
    }
}

fn parse_mnk(s: &str) -> Result<(usize, usize, usize)> {
    let parts: Vec<usize> = s
        .split('x')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("shape \"{s}\" should look like 1024x1024x1024 (MxNxK)"))?;
    match parts[..] {
        [m, n, k] => Ok((m, n, k)),
        [s] => Ok((s, s, s)),
        _ => anyhow::bail!("shape \"{s}\" should look like 1024x1024x1024 (MxNxK)"),
    }
}

fn parse_bchw(s: &str) -> Result<[usize; 4]> {
    let parts: Vec<usize> = s
        .split('x')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("shape \"{s}\" should look like 16x64x32x32 (BxCxHxW)"))?;
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

fn info(choice: AdapterChoice) -> Result<()> {
    let instance = instance_for(&choice)?;
    let mut adapters = pollster::block_on(list_adapters(&instance));
    adapters.sort_by_key(|a| rank(&a.get_info()));
    println!("adapters found ({}):", adapters.len());
    for a in &adapters {
        let i = a.get_info();
        println!("  - {}  driver: {} {}", describe(&i), i.driver, i.driver_info);
    }
    let gpu = Gpu::new_blocking(choice)?;
    println!("\nchosen: {}", describe(&gpu.info));
    println!("features used by wgdiff:");
    for (name, f) in [
        ("SHADER_F16", wgpu::Features::SHADER_F16),
        ("TIMESTAMP_QUERY", wgpu::Features::TIMESTAMP_QUERY),
        (
            "TIMESTAMP_QUERY_INSIDE_PASSES",
            wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES,
        ),
        ("SUBGROUP", wgpu::Features::SUBGROUP),
    ] {
        println!(
            "  {:<30} {}",
            name,
            if gpu.features.contains(f) {
                "yes"
            } else {
                "no (fallback path)"
            }
        );
    }
    println!(
        "  subgroup size                  {}..{}",
        gpu.info.subgroup_min_size, gpu.info.subgroup_max_size
    );
    let l = &gpu.limits;
    println!("limits:");
    for (name, v) in [
        (
            "max_storage_buffer_binding_size",
            l.max_storage_buffer_binding_size,
        ),
        ("max_buffer_size", l.max_buffer_size),
        (
            "max_storage_buffers_per_shader_stage",
            l.max_storage_buffers_per_shader_stage as u64,
        ),
        (
            "max_compute_workgroup_storage_size",
            l.max_compute_workgroup_storage_size as u64,
        ),
        (
            "max_compute_invocations_per_workgroup",
            l.max_compute_invocations_per_workgroup as u64,
        ),
        (
            "max_compute_workgroups_per_dimension",
            l.max_compute_workgroups_per_dimension as u64,
        ),
    ] {
        println!("  {name:<40} {v}");
    }
    Ok(())
}
