//! `wgdiff bench step --beside-diffusers PYTHON`: diffusers' sampling step timed on PyTorch's
//! CPU by a Python helper (scripts/diffusers_step.py, built in) the command talks to by lines.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use wgdiff::{Error, Result};

/// The helper's source, run with `PYTHON -c`.
const HELPER: &str = include_str!("../../scripts/diffusers_step.py");

/// A running helper with the model of one diffusers folder loaded.
pub struct DiffusersStep {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

fn helper_error(reason: String) -> Error {
    Error::Io {
        what: "the diffusers helper (scripts/diffusers_step.py)".into(),
        reason,
    }
}

impl DiffusersStep {
    /// Starts `python` on the helper with `folder` and waits until it has loaded the model.
    pub fn start(python: &Path, folder: &Path) -> Result<DiffusersStep> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(HELPER)
            .arg(folder)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| {
                helper_error(format!(
                    "{} cannot be started ({e}); give a Python with torch and diffusers \
                     (python3 -m venv ENV && ENV/bin/pip install torch diffusers safetensors)",
                    python.display()
                ))
            })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut helper = DiffusersStep { child, stdin, stdout };
        let line = helper.line()?;
        if line != "ready" {
            return Err(helper_error(format!("said `{line}` instead of `ready`")));
        }
        Ok(helper)
    }

    /// The next line the helper prints; its end (with the reason on its stderr) is an error.
    fn line(&mut self) -> Result<String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(line.trim().to_string()),
            Ok(_) => Err(helper_error(format!(
                "ended ({}); its error is above",
                self.child
                    .wait()
                    .map_or("status unknown".into(), |s| s.to_string())
            ))),
            Err(e) => Err(helper_error(e.to_string())),
        }
    }

    /// Seconds of one diffusers step at `batch`.
    pub fn step(&mut self, batch: usize) -> Result<f64> {
        writeln!(self.stdin, "{batch}").map_err(|e| helper_error(e.to_string()))?;
        let line = self.line()?;
        line.parse()
            .map_err(|_| helper_error(format!("answered `{line}`, not seconds")))
    }
}

impl Drop for DiffusersStep {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
