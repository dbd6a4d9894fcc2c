//! `wgdiff train --distributed mpi` under `mpirun -n 2 --oversubscribe` (feature `mpi`; CI runs
//! `cargo test --release --features mpi --test mpi`): two ranks, and two ranks of two devices,
//! follow the one-process run of the same global batch; a checkpoint of a 4-replica run resumes
//! in one process on the same trajectory; a killed rank ends the job with a message naming it
//! and leaves a checkpoint that loads and resumes; a rank that fails stops the job naming itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use wgdiff::checkpoint::Checkpoint;

const WGDIFF: &str = env!("CARGO_BIN_EXE_wgdiff");

/// Losses agree up to float summation order (see tests/engine/parallel.rs for the reasoning).
const LOSS_TOLERANCE: f32 = 1e-4;
/// Largest weight difference relative to the largest weight (a few of Adam's lr-sized steps).
const WEIGHT_TOLERANCE: f32 = 1e-2;

/// A fresh folder for one test's runs.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wgdiff-mpi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `wgdiff train` of the tiny U-Net on the shipped MNIST, global batch 8, into `out`, at a constant
/// lr: a decay over the run's last steps would make a 5-step run, resumed to 10, leave the
/// trajectory of the 10-step run.
fn train_args(out: &Path, steps: usize) -> Vec<String> {
    let data = format!(
        "mnist:{}",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets/mnist")
            .display()
    );
    let args = [
        "train",
        "--data",
        &data,
        "--preset",
        "tiny",
        "--batch",
        "8",
        "--lr",
        "3e-3",
        "--warmup",
        "0",
        "--lr-decay",
        "0",
        "--grid-images",
        "4",
        "--grid-steps",
        "2",
        "--max-minutes",
        "0",
        "--out",
    ];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.push(out.display().to_string());
    args.extend(["--steps".to_string(), steps.to_string()]);
    args
}

/// `mpirun -n 2 --oversubscribe` (as root too, as in CI containers) over `args`; the ranks
/// choose kernels by fixed rules, as [`command`] does.
fn mpirun(args: &[String]) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["-n", "2", "--oversubscribe", WGDIFF])
        .args(args)
        .env("WGDIFF_DETERMINISTIC", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    cmd
}

fn succeed(mut cmd: Command) -> Output {
    let out = cmd
        .output()
        .expect("mpirun and wgdiff start (apt-get install openmpi-bin)");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn checkpoint(run: &Path) -> Checkpoint {
    Checkpoint::load(&run.join("checkpoint.safetensors")).unwrap()
}

fn losses(ckpt: &Checkpoint) -> Vec<f32> {
    serde_json::from_value(ckpt.meta["losses"].clone()).unwrap()
}

/// Same losses (step by step) and weights within the tolerances.
fn assert_same_run(one: &Checkpoint, other: &Checkpoint, what: &str) {
    let (a, b) = (losses(one), losses(other));
    assert_eq!(a.len(), b.len(), "{what}: steps");
    let most = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    eprintln!("{what}: largest loss difference over {} steps {most:e}", a.len());
    for (step, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= LOSS_TOLERANCE * x.abs().max(1.0),
            "{what}, step {}: one process {x}, {y} ({a:?} vs {b:?})",
            step + 1
        );
    }
    let mut largest = 0f32;
    let mut worst = 0f32;
    for (name, t) in one.tensors.iter().filter(|(n, _)| n.starts_with("model.")) {
        for (x, y) in t.data.iter().zip(&other.tensors[name].data) {
            largest = largest.max(x.abs());
            worst = worst.max((x - y).abs());
        }
    }
    eprintln!("{what}: largest weight difference {worst:e} (largest weight {largest})");
    assert!(
        worst <= WEIGHT_TOLERANCE * largest,
        "{what}: weights differ by {worst} (largest {largest})"
    );
}

#[test]
fn two_ranks_and_two_ranks_of_two_devices_train_like_one_process() {
    let dir = folder("equal");
    let one = dir.join("one");
    succeed(command(&train_args(&one, 10)));
    let one = checkpoint(&one);

    let two = dir.join("two-ranks");
    let mut args = train_args(&two, 10);
    args.extend(["--distributed".into(), "mpi".into()]);
    let out = succeed(mpirun(&args));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("rank 1 of 2"), "each rank names itself: {log}");
    assert_same_run(&one, &checkpoint(&two), "2 ranks");

    // 2 ranks x 2 devices for 5 steps, then resumed by one process on one device.
    let four = dir.join("four-replicas");
    let mut args = train_args(&four, 5);
    args.extend([
        "--distributed".into(),
        "mpi".into(),
        "--devices".into(),
        "2".into(),
    ]);
    succeed(mpirun(&args));
    succeed(resume(&four, 10));
    assert_same_run(&one, &checkpoint(&four), "2 ranks x 2 devices, resumed on 1");
}

/// `wgdiff args` in one process, kernels chosen by fixed rules (`WGDIFF_DETERMINISTIC=1`: no
/// minutes of timing kernel variants on a fresh machine).
fn command(args: &[String]) -> Command {
    let mut cmd = Command::new(WGDIFF);
    cmd.args(args).env("WGDIFF_DETERMINISTIC", "1");
    cmd
}

/// One process resuming the checkpoint of `run` to `steps` steps.
fn resume(run: &Path, steps: usize) -> Command {
    let checkpoint = run.join("checkpoint.safetensors");
    let mut cmd = command(&[]);
    cmd.arg("train")
        .arg("--resume")
        .arg(checkpoint)
        .args(["--steps", &steps.to_string()]);
    cmd
}

#[test]
fn a_killed_rank_ends_the_job_naming_it_and_the_checkpoint_survives() {
    let dir = folder("kill");
    let run = dir.join("run");
    let mut args = train_args(&run, 100_000);
    args.extend([
        "--distributed".into(),
        "mpi".into(),
        "--checkpoint-every".into(),
        "1".into(),
    ]);
    let log = dir.join("log");
    let mut job = Running(
        mpirun(&args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    // Rank 0 writes a checkpoint every step: kill it once a few are written, likely mid-write.
    let saved = run.join("checkpoint.safetensors");
    let started = Instant::now();
    let pid = loop {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no checkpoint after 5 minutes"
        );
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        // (mpirun merges the ranks' lines; look for rank 0's anywhere)
        let pid = text
            .split("rank 0 of 2 on ")
            .nth(1)
            .and_then(|rest| rest.split("(pid ").nth(1))
            .and_then(|rest| rest.split(')').next())
            .map(str::to_string);
        match (pid, saved.exists()) {
            (Some(pid), true) if Checkpoint::load(&saved).is_ok_and(|c| losses(&c).len() >= 3) => break pid,
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    assert!(Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap()
        .success());
    let status = job.0.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "the job must fail when a rank dies: {text}");
    assert!(text.contains("rank 0"), "mpirun names the dead rank: {text}");
    // The atomic write leaves the last whole checkpoint: it loads and resumes.
    let ckpt = Checkpoint::load(&saved).expect("the checkpoint survives the kill");
    let step = losses(&ckpt).len();
    succeed(resume(&run, step + 1));
    assert_eq!(losses(&checkpoint(&run)).len(), step + 1);
}

#[test]
fn a_failing_rank_stops_the_job_with_an_error_naming_it() {
    let dir = folder("fail");
    let missing = dir.join("no-such-checkpoint.safetensors");
    let args = [
        "train".to_string(),
        "--distributed".into(),
        "mpi".into(),
        "--resume".into(),
        missing.display().to_string(),
    ];
    let out = mpirun(&args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("failed, stopping the job")
            && text.contains(" of 2 on ")
            && text.contains("no-such-checkpoint"),
        "the error names the rank and the file: {text}"
    );
}

/// A running mpirun job, stopped (SIGTERM: mpirun ends its ranks) if a test fails before it
/// has exited, so no ranks are left behind.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let _ = self.0.wait();
        }
    }
}
