"""PyTorch beside `wgdiff bench matmul|conv|train --beside-torch`: the same workloads in the same
rounds, for the ratio of each row (built into wgdiff, which runs it with `PYTHON -c SOURCE
WHERE`). It also holds the twin of the `mnist` preset's U-Net that scripts/torch-train-step.py
times.

WHERE (`--torch-device`): cpu (the default), cuda (f32 with TF32 off: the arithmetic of wgdiff's
f32 kernels) or cuda-bf16 (bf16 operands, and autocast for the U-Net twin: for reference).

Protocol (lines on stdin and stdout): it prints `ready <what it runs on>` (`ready PyTorch 2.15.0
CPU, 2 threads`) once torch is loaded, then answers each workload line by running that workload
twice and printing the seconds of the second run, once its threads are quiet (a bad line gets
`error <why>`). Inputs are made at a workload's first line and kept.
  matmul M N K                                  C[M,N] = A[M,K] @ B[K,N]
  conv N CIN H W COUT KH KW SH SW PH PW DH DW G PASS
      PASS forward: y = conv2d(x, w); input-grad: dx; weight-grad: dW; forward+backward: y,
      then dx, dW and the bias's sum of dy, as `wgdiff bench conv` times its own (no autograd
      tape, the same results)
  unet-train mnist B                            a training step of the U-Net twin at batch B
  unet-sample mnist B                           its sampling step (the network, a DDIM update)
"""

import math
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
        f"--beside-torch: {sys.executable} has no PyTorch; install it with\n"
        "    python3 -m venv ENV && ENV/bin/pip install torch\n"
        "(the CPU-only build is smaller: add --index-url https://download.pytorch.org/whl/cpu)\n"
        "and give --beside-torch ENV/bin/python",
        file=sys.stderr,
    )
    sys.exit(2)

# (Imported by scripts/torch-train-step.py, it runs on the CPU.)
WHERE = sys.argv[1] if __name__ == "__main__" and len(sys.argv) > 1 else "cpu"
if WHERE not in ("cpu", "cuda", "cuda-bf16"):
    sys.exit(f"--torch-device {WHERE!r}: cpu, cuda or cuda-bf16")
DEVICE = torch.device("cuda" if WHERE != "cpu" else "cpu")
DTYPE = torch.bfloat16 if WHERE == "cuda-bf16" else torch.float32
if DEVICE.type == "cuda":
    if not torch.cuda.is_available():
        sys.exit(f"--torch-device {WHERE}: PyTorch {torch.__version__} at {sys.executable} sees no CUDA GPU")
    # f32 means f32: TF32 rounds the operands to 10 bits of mantissa.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # cuDNN picks each conv's fastest algorithm at its first (untimed) run.
    torch.backends.cudnn.benchmark = True

torch.set_grad_enabled(False)
torch.manual_seed(0)


def describe():
    """What the helper runs on, for the rows' `device`."""
    if DEVICE.type == "cpu":
        return f"PyTorch {torch.__version__} CPU, {torch.get_num_threads()} threads"
    kind = "f32 (TF32 off)" if DTYPE == torch.float32 else "bf16"
    return f"PyTorch {torch.__version__} CUDA {kind}, {torch.cuda.get_device_name()}"


def randn(*shape):
    """Standard normal values of the helper's dtype on its device."""
    return torch.randn(*shape, device=DEVICE).to(DTYPE)


def autocast():
    """bf16 autocast for the U-Net twin under cuda-bf16 (its weights and Adam stay f32)."""
    return torch.autocast(device_type=DEVICE.type, dtype=torch.bfloat16, enabled=DTYPE == torch.bfloat16)

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

def timestep_embedding(t, dim):
    """DDPM's sinusoid (src/models/embedding.rs): [sin(t f_i) .., cos(t f_i) ..],
    f_i = exp(-ln(10000) i / (dim/2 - 1)), computed in f64 like wgdiff."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) / (half - 1) * torch.arange(half, dtype=torch.float64, device=t.device))
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


def unet_train_step(batch):
    """One f32 DDPM training step of the twin at `batch`, as `wgdiff bench train --preset mnist`
    times wgdiff's: random t per image, x_t = sqrt(ab) x0 + sqrt(1 - ab) eps with the linear
    betas, MSE on eps, backward, Adam (lr 1e-3), on a fixed random batch in [-1, 1]."""
    net = UNet().to(DEVICE)
    params = sum(p.numel() for p in net.parameters())
    assert params == EXPECTED_PARAMS, f"{params} parameters, wgdiff's mnist U-Net has {EXPECTED_PARAMS}"
    net.train()
    optimizer = torch.optim.Adam(net.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8)
    ab = alpha_bars().to(DEVICE)
    x0 = torch.rand(batch, IN_CHANNELS, IMAGE_SIZE, IMAGE_SIZE, device=DEVICE) * 2 - 1

    def train_step():
        with torch.enable_grad(), autocast():
            t = torch.randint(0, STEPS, (batch,), device=DEVICE)
            ab_t = ab[t].view(-1, 1, 1, 1)
            alpha, std = ab_t.sqrt().float(), (1 - ab_t).sqrt().float()
            eps = torch.randn_like(x0)
            loss = F.mse_loss(net(alpha * x0 + std * eps, t.float()).float(), eps)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    return train_step


def unet_sample_step(batch):
    """One sampling step of the twin at `batch` as `bench train`'s `sample-step skip 0`: the
    network at t = 500 without gradients, then a DDIM update x' = 1.01 x - 0.1 eps."""
    net = UNet().to(DEVICE).eval()
    x = torch.randn(batch, IN_CHANNELS, IMAGE_SIZE, IMAGE_SIZE, device=DEVICE)
    t = torch.full((batch,), 500.0, device=DEVICE)

    def sample_step():
        with torch.no_grad(), autocast():
            return x * 1.01 - 0.1 * net(x, t).float()

    return sample_step




def matmul(m, n, k):
    a, b = randn(m, k), randn(k, n)
    return lambda: torch.mm(a, b)


def conv(n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, pass_):
    x = randn(n, cin, h, w)
    weight = randn(cout, cin // groups, kh, kw) * 0.1
    geometry = dict(stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=groups)
    forward = lambda: F.conv2d(x, weight, **geometry)
    if pass_ == "forward":
        return forward
    dy = torch.randn_like(forward())
    if pass_ == "input-grad":
        return lambda: torch.nn.grad.conv2d_input(x.shape, weight, dy, **geometry)
    if pass_ == "weight-grad":
        return lambda: torch.nn.grad.conv2d_weight(x, weight.shape, dy, **geometry)
    if pass_ != "forward+backward":
        raise ValueError(f"unknown pass {pass_!r}")

    def forward_backward():
        forward()
        torch.nn.grad.conv2d_input(x.shape, weight, dy, **geometry)
        torch.nn.grad.conv2d_weight(x, weight.shape, dy, **geometry)
        dy.sum((0, 2, 3))

    return forward_backward


def build(line):
    kind, *words = line.split()
    if kind == "matmul":
        return matmul(*map(int, words))
    if kind == "conv":
        *sizes, pass_ = words
        return conv(*map(int, sizes), pass_)
    if kind in ("unet-train", "unet-sample"):
        preset, batch = words
        if preset != "mnist":
            raise ValueError(f"no PyTorch twin of preset {preset!r} (mnist has one)")
        return (unet_train_step if kind == "unet-train" else unet_sample_step)(int(batch))
    raise ValueError(f"unknown workload {kind!r}")


# Seconds the helper waits after a workload before answering.
QUIET_S = 0.1


def timed(workload):
    """Seconds of one run of `workload`, to its last kernel's end on a GPU."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    workload()
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def serve():
    workloads = {}
    print(f"ready {describe()}", flush=True)
    for line in sys.stdin:
        line = line.strip()
        try:
            if line not in workloads:
                workloads[line] = build(line)
            # Timed right after an untimed run, as PyTorch runs ops back to back: its OpenMP
            # threads are awake then (after ~50 ms idle, waking them cost this VM ~10 ms).
            timed(workloads[line])
            seconds = timed(workloads[line])
            # They spin for a while after an op (libgomp's default: 300,000 pauses, over 20 ms
            # here), which took the cores from wgdiff's next case (the blocked matmul at
            # 4096x64x576 ran at 38-49 GFLOP/s beside them, 75 alone): answer once they sleep.
            # (OMP_WAIT_POLICY=PASSIVE instead slowed PyTorch's own depthwise weight gradient 6x.)
            if DEVICE.type == "cpu":
                time.sleep(QUIET_S)
            print(seconds, flush=True)
        except (ValueError, TypeError, RuntimeError, AssertionError) as e:
            print(f"error {e}", flush=True)


if __name__ == "__main__":
    serve()
