#!/usr/bin/env python3
"""PyTorch (CPU) baseline for `wgdiff bench train --preset mnist --batch 64`: the same DDPM
U-Net training step (eps loss, backward, Adam) timed the same way, for the ratio in BENCHMARKS.md."""

import argparse
import json
import math
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
    import torch.nn.functional as F
    from torch import nn
except ImportError:
    print(
        "torch-train-step.py needs PyTorch; install the CPU build with\n"
        "    pip install torch --index-url https://download.pytorch.org/whl/cpu",
        file=sys.stderr,
    )
    sys.exit(2)

# UNetConfig::mnist() (src/models/unet_config.rs).
IMAGE_SIZE = 28
IN_CHANNELS = 1
BASE_CHANNELS = 32
CHANNEL_MULT = (1, 2, 2)
RES_BLOCKS = 2
ATTENTION_RESOLUTIONS = (7,)
HEADS = 4
NORM_GROUPS = 8
TIME_SINUSOID_DIM = 32
TIME_EMBED_DIM = 512
EXPECTED_PARAMS = 2_238_337

# Process::ddpm() (src/diffusion/process.rs) and AdamConfig::default() (src/optim/adam.rs).
STEPS = 1000
BETA_START, BETA_END = 1e-4, 0.02
LR = 1e-3

# FLOPs of one f32 training step of the mnist preset at batch 64 as wgdiff's kernels count
# them: gflops * median_ms * 1e6 of the train-step row of
# `wgdiff bench train --preset mnist --batch 64 --json --reps 1 --warmup 0`.
WGDIFF_BATCH = 64
WGDIFF_FLOPS_PER_STEP = 106_779_787_264


def timestep_embedding(t, dim):
    """DDPM's sinusoid (src/models/embedding.rs): [sin(t f_i) .., cos(t f_i) ..],
    f_i = exp(-ln(10000) i / (dim/2 - 1)), computed in f64 like wgdiff."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) / (half - 1) * torch.arange(half, dtype=torch.float64))
    args = t.to(torch.float64)[:, None] * freqs[None, :]
    return torch.cat([args.sin(), args.cos()], dim=1).float()


def conv3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1)


class ResBlock(nn.Module):
    """GroupNorm -> SiLU -> 3x3 conv, + Linear(SiLU(temb)), GroupNorm -> SiLU -> 3x3 conv,
    + the input (its 1x1 conv when the channels change)."""

    def __init__(self, cin, cout):
        super().__init__()
        self.norm1 = nn.GroupNorm(NORM_GROUPS, cin)
        self.conv1 = conv3(cin, cout)
        self.time = nn.Linear(TIME_EMBED_DIM, cout)
        self.norm2 = nn.GroupNorm(NORM_GROUPS, cout)
        self.conv2 = conv3(cout, cout)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class AttentionBlock(nn.Module):
    """x + out(attention(qkv(GroupNorm(x)))) over the H*W positions; the qkv channels are
    q, k, v, each split into heads (src/ops/attention.rs: spatial_self_attention)."""

    def __init__(self, channels):
        super().__init__()
        self.norm = nn.GroupNorm(NORM_GROUPS, channels)
        self.qkv = nn.Conv2d(channels, 3 * channels, 1)
        self.out = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        d = c // HEADS
        qkv = self.qkv(self.norm(x)).reshape(b, 3, HEADS, d, h * w).permute(1, 0, 2, 4, 3)
        attended = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return x + self.out(attended.transpose(2, 3).reshape(b, c, h, w))


class Stage(nn.Module):
    """A ResBlock and, at attention resolutions, the attention block after it."""

    def __init__(self, cin, cout, attention):
        super().__init__()
        self.res = ResBlock(cin, cout)
        self.attn = AttentionBlock(cout) if attention else nn.Identity()

    def forward(self, x, temb):
        return self.attn(self.res(x, temb))


class UNet(nn.Module):
    """The layout of src/models/unet.rs for the mnist preset (levels at 28, 14, 7 with 32, 64,
    64 channels; skip 0, no dropout, no classes)."""

    def __init__(self):
        super().__init__()
        levels = len(CHANNEL_MULT)
        channels = [BASE_CHANNELS * m for m in CHANNEL_MULT]
        attends = [IMAGE_SIZE >> i in ATTENTION_RESOLUTIONS for i in range(levels)]
        self.time_embed = nn.Sequential(
            nn.Linear(TIME_SINUSOID_DIM, TIME_EMBED_DIM),
            nn.SiLU(),
            nn.Linear(TIME_EMBED_DIM, TIME_EMBED_DIM),
        )
        self.conv_in = conv3(IN_CHANNELS, channels[0])
        skips = [channels[0]]
        h = channels[0]
        self.down_stages = nn.ModuleList()
        self.downsamples = nn.ModuleList()
        for i in range(levels):
            stages = nn.ModuleList()
            for _ in range(RES_BLOCKS):
                stages.append(Stage(h, channels[i], attends[i]))
                h = channels[i]
                skips.append(h)
            self.down_stages.append(stages)
            if i + 1 < levels:
                self.downsamples.append(conv3(h, h, stride=2))
                skips.append(h)
        self.mid_res0 = ResBlock(h, h)
        self.mid_attn = AttentionBlock(h)
        self.mid_res1 = ResBlock(h, h)
        # Built deepest level first, as the forward pass runs them.
        self.up_stages = nn.ModuleList()
        self.upsamples = nn.ModuleList()
        for i in reversed(range(levels)):
            stages = nn.ModuleList()
            for _ in range(RES_BLOCKS + 1):
                stages.append(Stage(h + skips.pop(), channels[i], attends[i]))
                h = channels[i]
            self.up_stages.append(stages)
            if i > 0:
                self.upsamples.append(conv3(h, h))
        self.norm_out = nn.GroupNorm(NORM_GROUPS, channels[0])
        self.conv_out = conv3(channels[0], IN_CHANNELS)
        self._init_like_wgdiff()

    def _init_like_wgdiff(self):
        """Weights ~ N(0, 1/fan_in), zero biases (src/nn/conv.rs, linear.rs, attention.rs)."""
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.normal_(module.weight, 0.0, module.weight[0].numel() ** -0.5)
                nn.init.zeros_(module.bias)

    def forward(self, x, t):
        temb = self.time_embed(timestep_embedding(t, TIME_SINUSOID_DIM))
        hs = [self.conv_in(x)]
        for i, stages in enumerate(self.down_stages):
            for stage in stages:
                hs.append(stage(hs[-1], temb))
            if i < len(self.downsamples):
                hs.append(self.downsamples[i](hs[-1]))
        h = self.mid_res1(self.mid_attn(self.mid_res0(hs[-1], temb)), temb)
        for i, stages in enumerate(self.up_stages):
            for stage in stages:
                h = stage(torch.cat([h, hs.pop()], dim=1), temb)
            if i < len(self.upsamples):
                h = self.upsamples[i](F.interpolate(h, scale_factor=2, mode="nearest"))
        return self.conv_out(F.silu(self.norm_out(h)))


def alpha_bars():
    """alpha-bar_i = prod_{j <= i} (1 - beta_j) for the linear betas, in f64."""
    betas = torch.linspace(BETA_START, BETA_END, STEPS, dtype=torch.float64)
    return torch.cumprod(1.0 - betas, dim=0)


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

    net = UNet()
    params = sum(p.numel() for p in net.parameters())
    assert params == EXPECTED_PARAMS, f"{params} parameters, wgdiff's mnist U-Net has {EXPECTED_PARAMS}"
    net.train()
    optimizer = torch.optim.Adam(net.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8)
    ab = alpha_bars()
    x0 = torch.rand(args.batch, IN_CHANNELS, IMAGE_SIZE, IMAGE_SIZE) * 2 - 1

    def train_step():
        t = torch.randint(0, STEPS, (args.batch,))
        ab_t = ab[t].view(-1, 1, 1, 1)
        alpha, std = ab_t.sqrt().float(), (1 - ab_t).sqrt().float()
        eps = torch.randn_like(x0)
        loss = F.mse_loss(net(alpha * x0 + std * eps, t.float()), eps)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

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
