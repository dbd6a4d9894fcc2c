//! `wgdiff bench matmul|conv|train --beside-torch [PYTHON]`: PyTorch on the CPU runs the same
//! workloads in the same rounds (scripts/torch_bench.py, built in), as the bench's peer.

use super::python_helper::PythonHelper;
use std::path::Path;
use wgdiff::bench::Peer;
use wgdiff::Result;

/// The helper's source, run with `PYTHON -c`.
const HELPER: &str = include_str!("../../scripts/torch_bench.py");

/// A running helper, and what it runs on (`PyTorch 2.15.0 CPU, 2 threads`).
pub struct TorchPeer {
    helper: PythonHelper,
    device: String,
}

impl TorchPeer {
    /// Starts `python` on the helper and waits until torch is loaded.
    pub fn start(python: &Path) -> Result<TorchPeer> {
        let (helper, ready) = PythonHelper::start(
            python,
            "the PyTorch helper (scripts/torch_bench.py)",
            HELPER,
            &[],
            "torch (python3 -m venv ENV && ENV/bin/pip install torch)",
        )?;
        // `torch=2.15.0 threads=2`
        let field = |key: &str| {
            ready
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or("?")
                .to_string()
        };
        let device = format!("PyTorch {} CPU, {} threads", field("torch="), field("threads="));
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
