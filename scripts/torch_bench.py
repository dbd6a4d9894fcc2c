"""PyTorch on the CPU beside `wgdiff bench matmul|conv --beside-torch`: the same workloads in
the same rounds, for the ratio of each row (built into wgdiff, which runs it with `PYTHON -c`).

Protocol (lines on stdin and stdout): it prints `ready torch=<version> threads=<n>` once torch
is loaded, then answers each workload line by running that workload once and printing its
seconds (a bad line gets `error <why>`). Inputs are made at a workload's first line and kept.
  matmul M N K                                  C[M,N] = A[M,K] @ B[K,N]
  conv N CIN H W COUT KH KW SH SW PH PW DH DW G PASS
      PASS forward: y = conv2d(x, w); forward+backward: y, then dx, dW and the bias's sum of
      dy, as `wgdiff bench conv` times its own (no autograd tape, the same three results)
"""

import sys
import time
import warnings

# torch warns at import when NumPy is absent; nothing here uses NumPy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print(
        f"--beside-torch: {sys.executable} has no PyTorch; install it with\n"
        "    python3 -m venv ENV && ENV/bin/pip install torch\n"
        "(the CPU-only build is smaller: add --index-url https://download.pytorch.org/whl/cpu)\n"
        "and give --beside-torch ENV/bin/python",
        file=sys.stderr,
    )
    sys.exit(2)

torch.set_grad_enabled(False)
torch.manual_seed(0)


def matmul(m, n, k):
    a, b = torch.randn(m, k), torch.randn(k, n)
    return lambda: torch.mm(a, b)


def conv(n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, pass_):
    x = torch.randn(n, cin, h, w)
    weight = torch.randn(cout, cin // groups, kh, kw) * 0.1
    geometry = dict(stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=groups)
    forward = lambda: F.conv2d(x, weight, **geometry)
    if pass_ == "forward":
        return forward
    if pass_ != "forward+backward":
        raise ValueError(f"unknown pass {pass_!r}")
    dy = torch.randn_like(forward())

    def forward_backward():
        forward()
        torch.nn.grad.conv2d_input(x.shape, weight, dy, **geometry)
        torch.nn.grad.conv2d_weight(x, weight.shape, dy, **geometry)
        dy.sum((0, 2, 3))

    return forward_backward


def build(line):
    kind, *numbers = line.split()
    if kind == "matmul":
        return matmul(*map(int, numbers))
    if kind == "conv":
        *sizes, pass_ = numbers
        return conv(*map(int, sizes), pass_)
    raise ValueError(f"unknown workload {kind!r}")


workloads = {}
print(f"ready torch={torch.__version__} threads={torch.get_num_threads()}", flush=True)
for line in sys.stdin:
    line = line.strip()
    try:
        if line not in workloads:
            workloads[line] = build(line)
        start = time.perf_counter()
        workloads[line]()
        print(time.perf_counter() - start, flush=True)
    except (ValueError, TypeError, RuntimeError) as e:
        print(f"error {e}", flush=True)
