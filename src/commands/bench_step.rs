//! `wgdiff bench step --beside-diffusers PYTHON`: diffusers' sampling step timed on PyTorch's
//! CPU by a Python helper (scripts/diffusers_step.py, built in).

use super::python_helper::PythonHelper;
use std::path::Path;
use wgdiff::Result;

/// The helper's source, run with `PYTHON -c`.
const HELPER: &str = include_str!("../../scripts/diffusers_step.py");

/// A running helper with the model of one diffusers folder loaded.
pub struct DiffusersStep(PythonHelper);

impl DiffusersStep {
    /// Starts `python` on the helper with `folder` and waits until it has loaded the model.
    pub fn start(python: &Path, folder: &Path) -> Result<DiffusersStep> {
        let (helper, _) = PythonHelper::start(
            python,
            "the diffusers helper (scripts/diffusers_step.py)",
            HELPER,
            &[folder.as_os_str()],
            "torch and diffusers (python3 -m venv ENV && ENV/bin/pip install torch diffusers safetensors)",
        )?;
        Ok(DiffusersStep(helper))
    }

    /// Seconds of one diffusers step at `batch`.
    pub fn step(&mut self, batch: usize) -> Result<f64> {
        self.0.seconds(&batch.to_string())
    }
}
