//! `wgdiff bench matmul|conv|train --beside-torch [PYTHON]`: PyTorch runs the same workloads in
//! the same rounds (scripts/torch_bench.py, built in), as the bench's peer, on the CPU or, with
//! `--torch-device`, on a CUDA GPU.

use super::python_helper::PythonHelper;
use std::path::Path;
use wgdiff::bench::Peer;
use wgdiff::Result;

/// The helper's source, run with `PYTHON -c`.
const HELPER: &str = include_str!("../../scripts/torch_bench.py");

/// Where the PyTorch peer runs (`--torch-device`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TorchDevice {
    /// PyTorch's CPU path, on the cores wgdiff's adapter shares
    #[default]
    Cpu,
    /// A CUDA GPU in f32 with TF32 off: the arithmetic of wgdiff's f32 kernels
    Cuda,
    /// A CUDA GPU in bf16 (operands; autocast for the U-Net twins): for reference
    CudaBf16,
}

impl TorchDevice {
    /// The helpers' argument for it.
    pub fn arg(self) -> &'static str {
        match self {
            TorchDevice::Cpu => "cpu",
            TorchDevice::Cuda => "cuda",
            TorchDevice::CudaBf16 => "cuda-bf16",
        }
    }
}

/// A running helper, and what it runs on (`PyTorch 2.15.0 CPU, 2 threads`).
pub struct TorchPeer {
    helper: PythonHelper,
    device: String,
}

impl TorchPeer {
    /// Starts `python` on the helper and waits until torch is loaded on `device`.
    pub fn start(python: &Path, device: TorchDevice) -> Result<TorchPeer> {
        let (helper, device) = PythonHelper::start(
            python,
            "the PyTorch helper (scripts/torch_bench.py)",
            HELPER,
            &[device.arg().as_ref()],
            "torch (python3 -m venv ENV && ENV/bin/pip install torch)",
        )?;
        Ok(TorchPeer { helper, device })
    }
}

impl Peer for TorchPeer {
    fn name(&self) -> &str {
        "torch"
    }

    fn device(&self) -> &str {
        &self.device
    }

    fn seconds(&mut self, workload: &str) -> Result<f64> {
        self.helper.seconds(workload)
    }
}
