//! `wgdiff gui`: opens the app (denoise, compare, skip, train, profile, experiments and device
//! views) on the engine's device; flags choose the first view, start its job, log frame times.

use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use wgdiff::app::{AppOptions, FrameClock, View};
use wgdiff::pipeline::DEFAULT_CHECKPOINT;
use wgdiff::soak::SoakLine;
use wgdiff::train::StepLog;
use wgdiff::AdapterChoice;

/// Flags of `wgdiff gui`.
#[derive(Args)]
pub struct GuiArgs {
    /// Checkpoint the denoise, skip and profile views load first
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    checkpoint: PathBuf,
    /// Folder of the app's training runs (<out>/train/checkpoint.safetensors) and frame exports
    #[arg(long, default_value = "runs/app")]
    out: PathBuf,
    /// View shown first: denoise, compare, skip, train, profile, experiments or device
    #[arg(long, default_value = "denoise", value_parser = parse_view)]
    view: View,
    /// A setting of the first view, KEY=VALUE, repeatable. denoise: checkpoint, sampler, steps,
    /// seed, count, class, guidance, skip-exponent, cache-interval, cache-depth, pause-after
    /// (stop after that step to branch from it), precision (f32, f16), schedule (a schedule file
    /// the run follows: sampler, steps, timesteps, skip depths), repeat (runs back to back);
    /// compare: seed, images,
    /// rounds, fid-samples, and a variant's denoise setting as LETTER.KEY (a.steps=4,
    /// c.checkpoint=int8.safetensors); train: preset, data, batch, lr, steps, seed, sample-every,
    /// checkpoint-every, fid-every, fid-share, max-minutes, grid-images, grid-steps (the sample
    /// grid the run ends with), out (e.g. --view train --set preset=tiny); experiments:
    /// experiment (adaptive-skip, compression, ladder, skip-search, speedrun, step-search), quick
    /// (true, false), download (a report file handed over when the run ends: a download in the
    /// page), then that experiment's own flags as `wgdiff experiment` takes them (e.g. --view
    /// experiments --set experiment=compression --set samples=50 --set out=runs/c)
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    settings: Vec<(String, String)>,
    /// Start the first view's job at once (sampling, comparing, measuring, training, profiling or
    /// the experiment); a
    /// denoise run then saves its samples to <out>/frames/samples.png
    #[arg(long)]
    autorun: bool,
    /// Write every frame's interval and build time to this CSV when the app closes
    #[arg(long, value_name = "CSV")]
    frame_log: Option<PathBuf>,
    /// Write the train view's steps (loss, seconds, elapsed) to this CSV when the app closes
    #[arg(long, value_name = "CSV")]
    step_log: Option<PathBuf>,
    /// Rewrite this CSV every minute with a line of the process's resident memory, the buffer
    /// pool's bytes and that minute's frame times (a long session's check for leaks: `wgdiff
    /// bench soak`)
    #[arg(long, value_name = "CSV")]
    soak_log: Option<PathBuf>,
    /// Close the app once the --autorun job has ended (and --screenshot is taken)
    #[arg(long, requires = "autorun")]
    exit_when_done: bool,
    /// Save a screenshot of the window to this PNG, then close: after --screenshot-after seconds
    /// once the view shows its result (denoise: 60% of the steps or a pause; compare: every
    /// variant's figures; train: 6 steps and a sample grid; profile: the profile; experiments:
    /// the report written), at most 15
    /// minutes later
    #[arg(long, value_name = "PNG")]
    screenshot: Option<PathBuf>,
    /// Seconds before the screenshot (at the earliest)
    #[arg(long, default_value_t = 2.0, value_parser = parse_seconds)]
    screenshot_after: f64,
}

fn parse_setting(text: &str) -> std::result::Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("`{text}` is not KEY=VALUE (e.g. steps=20)"))
}

fn parse_seconds(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err(format!("`{text}` is not a number of seconds (0 or more)")),
    }
}

/// Refuses, before the window opens, outputs that would replace another kind of file (a
/// checkpoint given by mistake) or that cannot be written: a screenshot replaces only an
/// earlier PNG, a log only an earlier log of its kind.
fn check_outputs(args: &GuiArgs) -> Result<()> {
    let writable = |path: &Path, flag: &str| {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        wgdiff::fsio::check_writable_dir(dir.unwrap_or(Path::new(".")))
            .with_context(|| format!("--{flag} {}", path.display()))
    };
    if let Some(path) = &args.screenshot {
        wgdiff::data::check_png_output(path).context("--screenshot")?;
        writable(path, "screenshot")?;
    }
    let logs = [
        (
            &args.frame_log,
            "frame-log",
            FrameClock::CSV_HEADER,
            "a frame log",
        ),
        (&args.step_log, "step-log", StepLog::CSV_HEADER, "a step log"),
        (&args.soak_log, "soak-log", SoakLine::CSV_HEADER, "a soak log"),
    ];
    for (path, flag, header, kind) in logs {
        if let Some(path) = path {
            wgdiff::fsio::check_replaceable(path, header.as_bytes(), kind)
                .with_context(|| format!("--{flag}"))?;
            writable(path, flag)?;
        }
    }
    Ok(())
}

fn parse_view(name: &str) -> std::result::Result<View, String> {
    name.parse().map_err(|e: wgdiff::Error| e.to_string())
}

/// Opens the app on the device `choice` selects (the same one every command uses).
pub fn run(choice: AdapterChoice, args: GuiArgs) -> Result<()> {
    check_outputs(&args)?;
    let gpu = super::open_gpu(choice.clone())?;
    eprintln!("device: {}", wgdiff::gpu::describe(&gpu.info));
    let options = AppOptions {
        checkpoint: args.checkpoint,
        out: args.out,
        view: args.view,
        settings: args.settings,
        autorun: args.autorun,
        frame_log: args.frame_log,
        step_log: args.step_log,
        soak_log: args.soak_log,
        exit_when_done: args.exit_when_done,
        screenshot: args.screenshot,
        screenshot_after: args.screenshot_after,
        choice,
        failures: Default::default(),
    };
    wgdiff::app::run_native(gpu, options)?;
    Ok(())
}
