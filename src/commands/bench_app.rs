//! `wgdiff bench app`: runs the app's train view (`wgdiff gui --autorun --exit-when-done`) and
//! `wgdiff train` on the same settings in alternating rounds and compares their step logs.

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::Command;
use wgdiff::bench::app::{table, AppRound, AppSummary};
use wgdiff::AdapterChoice;

/// Flags of `wgdiff bench app`.
#[derive(Args)]
pub struct BenchAppArgs {
    /// Training steps of every run
    #[arg(long, default_value_t = 60)]
    steps: usize,
    /// Rounds; each runs the CLI and the app once, alternating which goes first
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Steps left out at the start of every run (kernel compiles, tuning, warm caches)
    #[arg(long, default_value_t = 5)]
    skip: usize,
    /// A training setting both runs take, KEY=VALUE (the train view's keys: preset, data, batch,
    /// lr, warmup, seed, sample-every, checkpoint-every, fid-every, max-minutes), repeatable;
    /// the rest is the library's recipe
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Folder for the runs, their step logs and the app's frame logs [default: a temporary one,
    /// removed afterwards]
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object per round and one for the summary instead of the table
    #[arg(long)]
    pub json: bool,
}

/// Keys `--set` may not give: the bench sets them.
const BENCH_KEYS: [&str; 2] = ["steps", "out"];

/// Runs the rounds and prints the table (or JSON lines).
pub fn run(choice: &AdapterChoice, args: BenchAppArgs) -> Result<()> {
    needs_display("app", "scripts/bench-app.sh")?;
    let settings: Vec<(&str, &str)> = args
        .settings
        .iter()
        .map(|s| {
            let (key, value) = s
                .split_once('=')
                .with_context(|| format!("--set {s}: not KEY=VALUE (e.g. batch=64)"))?;
            if BENCH_KEYS.contains(&key) {
                bail!("--set {key}: the bench sets it (use --steps; runs go to --out)");
            }
            Ok((key, value))
        })
        .collect::<Result<_>>()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("wgdiff-bench-app-{}", std::process::id())));
    let measured = measure(choice, &args, &settings, &out);
    if args.out.is_none() {
        let _ = std::fs::remove_dir_all(&out);
    }
    let rounds = measured?;
    if args.json {
        for r in &rounds {
            println!("{}", serde_json::to_string(r)?);
        }
        println!("{}", serde_json::to_string(&AppSummary::of(&rounds))?);
    } else {
        print!("{}", table(&rounds));
        if args.out.is_some() {
            println!("runs and logs: {}", out.display());
        }
    }
    Ok(())
}

/// The rounds, their runs and logs in `out`.
fn measure(
    choice: &AdapterChoice,
    args: &BenchAppArgs,
    settings: &[(&str, &str)],
    out: &Path,
) -> Result<Vec<AppRound>> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let exe = std::env::current_exe().context("cannot find the wgdiff executable")?;
    let bar = ProgressBar::new(2 * args.rounds as u64);
    bar.set_style(ProgressStyle::with_template(
        "{bar:30} {pos}/{len} runs  {msg}  [{elapsed_precise}]",
    )?);
    let mut rounds = Vec::new();
    for round in 1..=args.rounds {
        let cli = out.join(format!("cli-{round}"));
        let app = out.join(format!("app-{round}"));
        let frames = out.join(format!("app-{round}-frames.csv"));
        let cli_log = out.join(format!("cli-{round}-steps.csv"));
        let app_log = out.join(format!("app-{round}-steps.csv"));
        let mut train = child(&exe, choice);
        train.args(["train", "--force", "--steps", &args.steps.to_string(), "--out"]);
        train.arg(&cli).arg("--step-log").arg(&cli_log);
        for (key, value) in settings {
            train.arg(format!("--{key}")).arg(value);
        }
        let mut gui = child(&exe, choice);
        gui.args(["gui", "--view", "train", "--autorun", "--exit-when-done"]);
        gui.arg("--set").arg(format!("steps={}", args.steps));
        gui.arg("--set").arg(format!("out={}", app.display()));
        gui.arg("--frame-log")
            .arg(&frames)
            .arg("--step-log")
            .arg(&app_log);
        for (key, value) in settings {
            gui.arg("--set").arg(format!("{key}={value}"));
        }
        let mut runs = [("CLI", train), ("app", gui)];
        if round % 2 == 0 {
            runs.reverse();
        }
        for (name, command) in &mut runs {
            bar.set_message(format!("round {round}: the {name}"));
            finish(name, command)?;
            bar.inc(1);
        }
        let read = |path: &Path| {
            std::fs::read_to_string(path).with_context(|| format!("{} was not written", path.display()))
        };
        let (cli_text, app_text, frame_text) = (read(&cli_log)?, read(&app_log)?, read(&frames)?);
        let name = |p: &Path| p.display().to_string();
        rounds.push(AppRound::from_logs(
            round,
            (&cli_text, &name(&cli_log)),
            (&app_text, &name(&app_log)),
            (&frame_text, &name(&frames)),
            args.skip,
        )?);
    }
    bar.finish_and_clear();
    Ok(rounds)
}

/// Refuses `wgdiff bench {bench}` without a display, naming the `script` that brings Xvfb.
pub(super) fn needs_display(bench: &str, script: &str) -> Result<()> {
    if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
        bail!(
            "wgdiff bench {bench} opens the app's window and needs a display (DISPLAY or WAYLAND_DISPLAY); \
             on a machine without one, {script} runs it under Xvfb"
        );
    }
    Ok(())
}

/// A command running this executable on the adapter `choice` names.
pub(super) fn child(exe: &Path, choice: &AdapterChoice) -> Command {
    let mut command = Command::new(exe);
    if let Some(backend) = &choice.backend {
        command.arg("--backend").arg(backend);
    }
    if let Some(adapter) = &choice.adapter {
        command.arg("--adapter").arg(adapter);
    }
    command
}

/// Runs `command` to its end; an error with the end of its output when it fails.
pub(super) fn finish(name: &str, command: &mut Command) -> Result<()> {
    let output = command
        .output()
        .with_context(|| format!("cannot start the {name} run"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("the {name} run failed ({}):\n{}", output.status, tail.join("\n"));
    }
    Ok(())
}
