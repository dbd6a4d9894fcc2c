//! Crash safety of `wgdiff train`, proven on the binary: SIGKILL at random moments never leaves
//! an unreadable checkpoint and loses at most one checkpoint interval (`WGDIFF_KILLS`, default
//! 3; the long form is 20), and SIGINT/SIGTERM write a checkpoint and exit with status 130.

use crate::common::wgdiff;
use rand::Rng;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use wgdiff::checkpoint::Checkpoint;

/// Checkpoint interval of the runs here, in steps.
const INTERVAL: usize = 2;

fn run_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wgdiff-crash-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A tiny-preset run that would go on for hours, writing a checkpoint every [`INTERVAL`] steps
/// (or resuming `resume`); its stderr lines arrive on the returned channel.
fn start_training(out: &Path, resume: Option<&Path>) -> (Child, mpsc::Receiver<String>) {
    let mut cmd = wgdiff();
    cmd.arg("train");
    match resume {
        Some(ckpt) => cmd.args(["--resume".as_ref(), ckpt.as_os_str()]),
        None => cmd.args([
            "--preset",
            "tiny",
            "--batch",
            "8",
            "--steps",
            "1000000",
            "--max-minutes",
            "0",
        ]),
    };
    cmd.args([
        "--checkpoint-every".as_ref(),
        INTERVAL.to_string().as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let mut child = cmd.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    (child, lines)
}

/// The step of a progress line `step N/M ...`.
fn progress_step(line: &str) -> Option<usize> {
    line.strip_prefix("step ")?.split('/').next()?.parse().ok()
}

/// Waits for the first progress line and returns its step; fails with the output on exit.
fn first_step(lines: &mpsc::Receiver<String>, seen: &mut Vec<String>) -> usize {
    step_at_least(lines, seen, 0)
}

/// Waits for a progress line of step `least` or later and returns its step; fails with the
/// output on exit.
fn step_at_least(lines: &mpsc::Receiver<String>, seen: &mut Vec<String>, least: usize) -> usize {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(300))
            .unwrap_or_else(|_| panic!("no training step {least} within 300 s; output: {seen:#?}"));
        seen.push(line.clone());
        match progress_step(&line) {
            Some(step) if step >= least => return step,
            _ => {}
        }
    }
}

/// The last step the process printed (reads its output to the end: call after it exited).
fn last_printed(lines: &mpsc::Receiver<String>, first: usize) -> usize {
    lines
        .iter()
        .filter_map(|l| progress_step(&l))
        .max()
        .unwrap_or(first)
}

fn checkpoint_step(path: &Path) -> usize {
    let ckpt = Checkpoint::load(path).unwrap_or_else(|e| panic!("unreadable checkpoint after a kill: {e}"));
    ckpt.meta["step"].as_u64().expect("a step in the checkpoint") as usize
}

#[test]
fn sigkill_at_random_moments_never_loses_more_than_one_checkpoint_interval() {
    let kills: usize = std::env::var("WGDIFF_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let out = run_dir("sigkill");
    let checkpoint = out.join("checkpoint.safetensors");
    let mut rng = crate::common::rng();
    let mut max_lost = 0;
    for kill in 0..kills {
        let resume = checkpoint.exists().then_some(checkpoint.as_path());
        let resumed_from = resume.map(checkpoint_step);
        let (mut child, lines) = start_training(&out, resume);
        let mut seen = Vec::new();
        let first = first_step(&lines, &mut seen);
        if let Some(from) = resumed_from {
            assert_eq!(
                first,
                from + 1,
                "kill {kill}: the resume did not continue from step {from}"
            );
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(0..3000)));
        child.kill().unwrap();
        child.wait().unwrap();
        let printed = last_printed(&lines, first);
        // a kill before the first interval's write leaves no checkpoint: step 0 is what is saved
        let saved = match checkpoint.exists() {
            true => checkpoint_step(&checkpoint),
            false => 0,
        };
        let lost = printed.saturating_sub(saved);
        assert!(
            lost <= INTERVAL,
            "kill {kill}: step {printed} was done but the checkpoint holds step {saved}"
        );
        max_lost = max_lost.max(lost);
    }
    println!(
        "{kills} SIGKILLs: 0 unreadable checkpoints, at most {max_lost} steps lost (interval {INTERVAL})"
    );
    // A last run goes past a checkpoint write (every kill may have come before the first one,
    // on a loaded machine), then a resume finishes cleanly and its write removes the killed
    // writers' temporaries.
    let (mut child, lines) = start_training(&out, checkpoint.exists().then_some(checkpoint.as_path()));
    let mut seen = Vec::new();
    let first = first_step(&lines, &mut seen);
    step_at_least(&lines, &mut seen, first + INTERVAL + 1);
    child.kill().unwrap();
    child.wait().unwrap();
    let step = checkpoint_step(&checkpoint);
    let status = wgdiff()
        .args(["train", "--resume"])
        .arg(&checkpoint)
        .args(["--steps", &(step + 1).to_string()])
        .args(["--grid-images", "1", "--grid-steps", "1"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind: {leftovers:?}");
}

#[test]
fn sigint_and_sigterm_write_a_checkpoint_and_exit_130() {
    // (a double press of Ctrl-C, 50 ms apart, is one request: it ended the run at once, with
    // no checkpoint and the saved stop's status)
    for signals in [&["INT"][..], &["TERM"], &["INT", "INT"]] {
        let signal = signals.join("+");
        let out = run_dir(&format!("sig{}", signals.join("")));
        let (mut child, lines) = start_training(&out, None);
        let first = first_step(&lines, &mut Vec::new());
        for (i, signal) in signals.iter().enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            let killed = Command::new("kill")
                .args([format!("-{signal}"), child.id().to_string()])
                .status()
                .unwrap();
            assert!(killed.success());
        }
        let status = child.wait().unwrap();
        let rest: Vec<String> = lines.iter().collect();
        assert_eq!(status.code(), Some(130), "SIG{signal}: {rest:#?}");
        assert!(
            rest.iter().any(|l| l.contains("stopped by a signal")),
            "SIG{signal}: {rest:#?}"
        );
        let printed = rest
            .iter()
            .filter_map(|l| progress_step(l))
            .max()
            .unwrap_or(first);
        assert_eq!(
            checkpoint_step(&out.join("checkpoint.safetensors")),
            printed,
            "SIG{signal}: the checkpoint is not of the last step done"
        );
    }
}

#[test]
fn a_signal_during_the_final_grid_ends_it_at_once_with_the_checkpoint_and_step_log_written() {
    // (a run's final grid is not interruptible from inside; with the DDPM CIFAR-10 preset it
    // sampled for over 20 minutes and ignored SIGTERM)
    let out = run_dir("final-grid");
    let log = out.with_extension("steps.csv");
    let mut child = wgdiff()
        .args([
            "train",
            "--preset",
            "tiny",
            "--batch",
            "8",
            "--steps",
            "3",
            "--max-minutes",
            "0",
        ])
        .args(["--grid-images", "64", "--grid-steps", "500", "--out"])
        .arg(&out)
        .arg("--step-log")
        .arg(&log)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref().map_while(Result::ok) {
        seen.push(line.clone());
        if line.contains("sampling the final grid") {
            break;
        }
    }
    assert!(
        seen.iter().any(|l| l.contains("Ctrl-C skips the grid")),
        "the run did not say it samples its final grid: {seen:#?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let rest = rest.join("\n");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen:#?}\n{rest}");
    assert!(rest.contains("during the final sample grid"), "{rest}");
    assert_eq!(checkpoint_step(&out.join("checkpoint.safetensors")), 3);
    let steps = std::fs::read_to_string(&log).expect("the step log is written before the grid");
    assert_eq!(steps.lines().count(), 4, "{steps}");
    assert!(!out.join("samples.png").exists());
}
