//! A Python helper the bench commands talk to by lines (diffusers' sampling step, PyTorch's
//! matmul, convs and U-Net steps, on the CPU beside wgdiff): started as `PYTHON -c SOURCE ARGS...`, it prints
//! `ready ...` once loaded, then answers each request line with one line. Its errors (a missing
//! package and how to install it) go to the terminal through its stderr.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use wgdiff::{Error, Result};

pub struct PythonHelper {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The helper named in errors, e.g. "the diffusers helper (scripts/diffusers_step.py)".
    what: &'static str,
}

impl PythonHelper {
    /// Starts `python` on `source` with `args` and waits for its `ready` line, whose rest it
    /// returns (what the helper says of itself). `install` says what the Python needs.
    pub fn start(
        python: &Path,
        what: &'static str,
        source: &str,
        args: &[&OsStr],
        install: &str,
    ) -> Result<(PythonHelper, String)> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(source)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Io {
                what: what.into(),
                reason: format!(
                    "{} cannot be started ({e}); give a Python with {install}",
                    python.display()
                ),
            })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut helper = PythonHelper {
            child,
            stdin,
            stdout,
            what,
        };
        let line = helper.line()?;
        match line.strip_prefix("ready") {
            Some(rest) => Ok((helper, rest.trim().to_string())),
            None => Err(helper.error(format!("said `{line}` instead of `ready`"))),
        }
    }

    fn error(&self, reason: String) -> Error {
        Error::Io {
            what: self.what.into(),
            reason,
        }
    }

    /// The next line the helper prints; its end (with the reason on its stderr) is an error.
    fn line(&mut self) -> Result<String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(line.trim().to_string()),
            Ok(_) => {
                let status = self
                    .child
                    .wait()
                    .map_or("status unknown".into(), |s| s.to_string());
                Err(self.error(format!("ended ({status}); its error is above")))
            }
            Err(e) => Err(self.error(e.to_string())),
        }
    }

    /// Sends `request` and returns the answer, a number of seconds.
    pub fn seconds(&mut self, request: &str) -> Result<f64> {
        writeln!(self.stdin, "{request}").map_err(|e| self.error(e.to_string()))?;
        let line = self.line()?;
        line.parse()
            .map_err(|_| self.error(format!("answered `{line}` to `{request}`, not seconds")))
    }
}

impl Drop for PythonHelper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
