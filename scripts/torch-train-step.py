#!/usr/bin/env python3
"""PyTorch (CPU) baseline for `wgdiff bench train --preset mnist --batch 64`: the same DDPM
U-Net training step (eps loss, backward, Adam) timed the same way, for the ratio in BENCHMARKS.md."""

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
import warnings

# torch warns at import when NumPy is absent; nothing here uses NumPy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
try:
    import torch
except ImportError:
    print(
        "torch-train-step.py needs PyTorch; install the CPU build with\n"
        "    pip install torch --index-url https://download.pytorch.org/whl/cpu",
        file=sys.stderr,
    )
    sys.exit(2)

# The U-Net twin and its training step live in torch_bench.py (`bench train --beside-torch`).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bench import EXPECTED_PARAMS, IMAGE_SIZE, unet_train_step  # noqa: E402

# FLOPs of one f32 training step of the mnist preset at batch 64 as wgdiff's kernels count
# them: gflops * median_ms * 1e6 of the train-step row of
# `wgdiff bench train --preset mnist --batch 64 --json --reps 1 --warmup 0`.
WGDIFF_BATCH = 64
WGDIFF_FLOPS_PER_STEP = 106_779_787_264


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def parse_args():
    parser = argparse.ArgumentParser(
        description=(
            "Times one f32 DDPM training step of wgdiff's `mnist` U-Net (2,238,337 parameters) in "
            "PyTorch on the CPU: random t per image, x_t = sqrt(ab) x0 + sqrt(1 - ab) eps with linear "
            "betas 1e-4..0.02 over 1000 steps, MSE on eps, backward, Adam (lr 1e-3), on a fixed "
            "random batch in [-1, 1]. It mirrors `wgdiff bench train --preset mnist --batch 64`: "
            "untimed warm-up steps, then timed steps; it reports the median ms per step, img/s, "
            "GFLOP/s (with wgdiff's FLOP count, so both rates count the same work) and peak RSS."
        ),
    )
    parser.add_argument("--batch", type=int, default=64, help="images per training step (default: 64)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps before timing (default: 2)")
    parser.add_argument(
        "--reps", type=int, default=10, help="timed steps; the median is reported (default: 10)"
    )
    parser.add_argument(
        "--threads", type=int, help="torch intra-op threads (default: torch's own choice)"
    )
    parser.add_argument(
        "--flops-per-step",
        type=float,
        help=f"FLOPs of one training step for GFLOP/s (default: wgdiff's count, "
        f"{WGDIFF_FLOPS_PER_STEP:,} at batch {WGDIFF_BATCH}, scaled linearly to --batch)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.batch < 1 or args.warmup < 0 or args.reps < 1:
        parser.error("--batch and --reps must be at least 1, --warmup at least 0")
    if args.flops_per_step is None:
        args.flops_per_step = WGDIFF_FLOPS_PER_STEP * args.batch / WGDIFF_BATCH
    return args


def main():
    args = parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    train_step = unet_train_step(args.batch)
    params = EXPECTED_PARAMS
    for _ in range(args.warmup):
        train_step()
    times_ms = []
    for _ in range(args.reps):
        start = time.perf_counter()
        train_step()
        times_ms.append((time.perf_counter() - start) * 1e3)

    median_ms = statistics.median(times_ms)
    result = {
        "bench": "torch-train-step",
        "shape": f"mnist B{args.batch} {IMAGE_SIZE}x{IMAGE_SIZE}",
        "params": params,
        "median_ms": median_ms,
        "min_ms": min(times_ms),
        "reps": args.reps,
        "warmup": args.warmup,
        "img_per_s": args.batch / (median_ms / 1e3),
        "flops_per_step": args.flops_per_step,
        "gflops": args.flops_per_step / 1e9 / (median_ms / 1e3),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": cpu_model(),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"PyTorch {result['torch']} on {result['cpu']}, {result['threads']} threads")
    print(f"mnist U-Net: {params:,} parameters (matches wgdiff's {EXPECTED_PARAMS:,})")
    print(
        f"train-step {result['shape']}: median {median_ms:.1f} ms (min {result['min_ms']:.1f} ms) "
        f"over {args.reps} steps after {args.warmup} warm-up"
    )
    print(
        f"{result['img_per_s']:.2f} img/s, {result['gflops']:.2f} GFLOP/s "
        f"({args.flops_per_step / 1e9:.2f} GFLOP per step as wgdiff counts it)"
    )
    print(f"peak RSS {result['peak_rss_mib']:.1f} MiB")


if __name__ == "__main__":
    main()
