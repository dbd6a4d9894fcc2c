//! `wgdiff bench step --beside-diffusers PYTHON`: diffusers' sampling step timed on PyTorch's
//! CPU (or, with `--torch-device`, a CUDA GPU) by a Python helper (scripts/diffusers_step.py,
//! built in).

use super::bench_torch::TorchDevice;
use super::python_helper::PythonHelper;
use std::path::Path;
use wgdiff::Result;

/// The helper's source, run with `PYTHON -c`.
const HELPER: &str = include_str!("../../scripts/diffusers_step.py");

/// A running helper with the model of one diffusers folder loaded, and what it runs on
/// (`diffusers 0.42.1, PyTorch 2.15.0 CPU, 2 threads`).
pub struct DiffusersStep(PythonHelper, String);

impl DiffusersStep {
    /// Starts `python` on the helper with `folder` on `device` and waits until it has loaded
    /// the model.
    pub fn start(python: &Path, folder: &Path, device: TorchDevice) -> Result<DiffusersStep> {
        let (helper, about) = PythonHelper::start(
            python,
            "the diffusers helper (scripts/diffusers_step.py)",
            HELPER,
            &[folder.as_os_str(), device.arg().as_ref()],
            "torch and diffusers (python3 -m venv ENV && ENV/bin/pip install torch diffusers safetensors)",
        )?;
        Ok(DiffusersStep(helper, about))
    }

    /// What the helper runs on.
    pub fn about(&self) -> &str {
        &self.1
    }

    /// Seconds of one diffusers step at `batch`.
    pub fn step(&mut self, batch: usize) -> Result<f64> {
        self.0.seconds(&batch.to_string())
    }
}
