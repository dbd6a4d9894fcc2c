//! `wgdiff bench soak`: a long app session in two phases (the train view training, then the
//! denoise view sampling back to back), each with a soak log, and the verdict on both.

use super::bench_app::{child, needs_display};
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wgdiff::soak::{SoakLine, SoakSummary};
use wgdiff::AdapterChoice;

/// Flags of `wgdiff bench soak`.
#[derive(Args)]
pub struct BenchSoakArgs {
    /// Minutes of the train view training the default recipe, with sample grids and MNIST-FID
    /// every --every steps (0: no training phase)
    #[arg(long, default_value_t = 60.0)]
    train_minutes: f64,
    /// Training steps between two sample grids and two MNIST-FID scores
    #[arg(long, default_value_t = 300, value_parser = super::at_least_one)]
    every: usize,
    /// Sampling runs of the denoise view back to back (0: no sampling phase)
    #[arg(long, default_value_t = 500)]
    runs: usize,
    /// Sampler steps of every sampling run (16 images each, DDPM, the shipped model)
    #[arg(long, default_value_t = 5, value_parser = super::at_least_one)]
    run_steps: usize,
    /// Minutes before memory counts as settled: resident memory and the buffer pool are compared
    /// with their values then
    #[arg(long, default_value_t = 5.0)]
    settle_minutes: f64,
    /// The 95th-percentile frame interval every minute with work must stay under (ms)
    #[arg(long, default_value_t = 100.0)]
    frame_target_ms: f64,
    /// Folder for the soak logs, the app's output and the training run
    #[arg(long, default_value = "runs/soak")]
    out: PathBuf,
    /// Only give the verdict on these soak logs (`wgdiff gui --soak-log`, e.g. of a soak that
    /// was stopped), each a phase named by its file; runs nothing
    #[arg(long, value_name = "CSV", num_args = 1..)]
    check: Vec<PathBuf>,
    /// Print one JSON object per phase instead of the table
    #[arg(long)]
    pub json: bool,
}

/// Runs the phases and prints their verdicts; an error when one failed.
pub fn run(choice: &AdapterChoice, args: BenchSoakArgs) -> Result<()> {
    if !args.check.is_empty() {
        let logs = args
            .check
            .iter()
            .map(|log| (log.display().to_string(), log.clone()));
        return report(&args, logs.collect());
    }
    needs_display("soak", "scripts/soak.sh")?;
    if args.train_minutes <= 0.0 && args.runs == 0 {
        bail!("nothing to soak: give --train-minutes or --runs above 0");
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    wgdiff::fsio::check_writable_dir(&args.out).with_context(|| format!("--out {}", args.out.display()))?;
    let mut phases = Vec::new();
    if args.train_minutes > 0.0 {
        let settings = [
            format!("max-minutes={}", args.train_minutes),
            "steps=100000000".into(),
            format!("sample-every={}", args.every),
            format!("fid-every={}", args.every),
            // (a folder of its own: the train view refuses to replace an earlier run)
            format!(
                "out={}",
                args.out.join(format!("train-{}", unix_seconds())).display()
            ),
        ];
        phases.push(("train", settings.to_vec(), args.train_minutes));
    }
    if args.runs > 0 {
        let settings = [
            format!("repeat={}", args.runs),
            format!("steps={}", args.run_steps),
        ];
        phases.push(("denoise", settings.to_vec(), f64::NAN));
    }
    let mut logs = Vec::new();
    for (view, settings, minutes) in phases {
        logs.push((view.to_string(), soak(choice, &args, view, &settings, minutes)?));
    }
    report(&args, logs)
}

/// Prints the verdicts on the soak `logs` (phase, file); an error when one failed.
fn report(args: &BenchSoakArgs, logs: Vec<(String, PathBuf)>) -> Result<()> {
    let mut summaries = Vec::new();
    for (view, log) in logs {
        let text = std::fs::read_to_string(&log)
            .with_context(|| format!("cannot read the soak log {}", log.display()))?;
        let lines = SoakLine::parse(&text, &log.display().to_string())?;
        let summary = SoakSummary::of(
            &lines,
            args.settle_minutes * 60.0,
            args.frame_target_ms,
            &log.display().to_string(),
        )?;
        summaries.push((view, summary));
    }
    if args.json {
        for (view, s) in &summaries {
            println!("{}", serde_json::json!({ "phase": view, "summary": s }));
        }
    } else {
        print!("{}", SoakSummary::TABLE_HEADER);
        for (view, s) in &summaries {
            print!("{}", s.row(view));
        }
        if args.check.is_empty() {
            println!("soak logs: {}", args.out.display());
        }
    }
    let failed: Vec<String> = summaries
        .iter()
        .filter(|(_, s)| !s.failures.is_empty())
        .map(|(view, s)| format!("{view}: {}", s.failures.join("; ")))
        .collect();
    if !failed.is_empty() {
        bail!("the soak failed: {}", failed.join(" | "));
    }
    Ok(())
}

/// Runs the app on `view` with `settings` to its end, its soak log in `args.out`; `minutes` is
/// the phase's expected length (NaN: unknown) for the progress bar.
fn soak(
    choice: &AdapterChoice,
    args: &BenchSoakArgs,
    view: &str,
    settings: &[String],
    minutes: f64,
) -> Result<PathBuf> {
    let log = args.out.join(format!("{view}-soak.csv"));
    let output = args.out.join(format!("{view}-app.log"));
    let _ = std::fs::remove_file(&log);
    let exe = std::env::current_exe().context("cannot find the wgdiff executable")?;
    let mut gui = child(&exe, choice);
    gui.args([
        "gui",
        "--view",
        view,
        "--autorun",
        "--exit-when-done",
        "--soak-log",
    ]);
    gui.arg(&log).arg("--out").arg(args.out.join("app"));
    for setting in settings {
        gui.arg("--set").arg(setting);
    }
    let stderr =
        std::fs::File::create(&output).with_context(|| format!("cannot create {}", output.display()))?;
    let mut running = gui
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start the app for the {view} phase"))?;
    let bar = match minutes.is_finite() {
        true => ProgressBar::new((minutes * 60.0) as u64),
        false => ProgressBar::new(args.runs as u64),
    };
    bar.set_style(ProgressStyle::with_template(
        "{bar:30} {pos}/{len} {msg} [{elapsed_precise}, eta {eta}]",
    )?);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = running.try_wait()? {
            break status;
        }
        std::thread::sleep(Duration::from_secs(5));
        let last = std::fs::read_to_string(&log)
            .ok()
            .and_then(|text| SoakLine::parse(&text, "").ok())
            .and_then(|lines| lines.last().cloned());
        match &last {
            Some(line) => bar.set_message(format!(
                "{view}: {} steps, {} runs, resident {:.0} MB, pool {:.0} MB, frame p95 {:.0} ms",
                line.steps,
                line.runs,
                line.rss_bytes.unwrap_or(0) as f64 / 1e6,
                line.pool_held_bytes() as f64 / 1e6,
                line.frame_p95_ms
            )),
            None => bar.set_message(format!("{view}: starting (a line a minute)")),
        }
        match minutes.is_finite() {
            true => bar.set_position(started.elapsed().as_secs()),
            false => bar.set_position(last.map_or(0, |l| l.runs as u64)),
        }
    };
    bar.finish_and_clear();
    if !status.success() {
        bail!("the app's {view} phase failed ({status}):\n{}", tail(&output));
    }
    Ok(log)
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The last lines of the app's output.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(12).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}
