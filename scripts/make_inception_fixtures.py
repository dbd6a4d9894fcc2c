#!/usr/bin/env python3
"""Writes tests/fixtures/inception.json: reference outputs of pytorch-fid's FID Inception-v3
for `tests/engine/inception.rs`. Offline only; the Rust test needs no Python.

    pip install torch torchvision pytorch-fid numpy
    python3 scripts/make_inception_fixtures.py

The network is pytorch-fid's own (`pytorch_fid.inception.InceptionV3` with the FID blocks
FIDInceptionA/C/E_1/E_2, bilinear resize to 299, 2048-d pool features). Its weight download
is replaced by a deterministic generator that the Rust test reproduces bit for bit, so the 24M
weights are never stored:

    key(name)   = FNV-1a 64 of the tensor name's UTF-8 bytes
                  (offset 0xcbf29ce484222325, prime 0x100000001b3)
    bits(name, i) = splitmix64(key(name) + i)          for element i in row-major order
    splitmix64(x):  z = x + 0x9E3779B97F4A7C15
                    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
                    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
                    return z ^ (z >> 31)               (all arithmetic mod 2^64)
    u           = (bits >> 11) * 2^-53                 uniform in [0, 1)
    value       = float32(lo + (hi - lo) * u)          computed in float64, then rounded

with (lo, hi) by tensor (`fan_in` = in-channels x kernel height x kernel width):

    *.conv.weight         -a, a   a = sqrt(6 / fan_in)   (He uniform: variance 2 / fan_in)
    *.bn.weight           0.8, 1.2
    *.bn.bias             -0.2, 0.2
    *.bn.running_mean     -0.2, 0.2
    *.bn.running_var      0.5, 1.5
    fc.weight             -a, a   a = sqrt(3 / 2048)     (variance 1 / 2048)
    fc.bias               -0.1, 0.1
    *.num_batches_tracked 0 (int64, unused in eval mode)

so activations stay O(1) through the network (the script prints their scale per block).

Inputs (values in [-1, 1], the range wgdiff images use; pytorch-fid's own input scaling
(0, 1) -> (-1, 1) is switched off, which is the same map since the resize is affine-invariant):

    image[n, c, y, x] = ((3 x^2 + 5 y + x y + 11 c + 17 n) mod 23) / 11 - 1

cases: "rgb" 2 x 3 x 32 x 32, and "gray" 1 x 1 x 28 x 28 repeated to 3 channels (what
wgdiff does with 1-channel images). The network runs in float64 on the float32 weights;
features are the 2048-d pool outputs, logits = features @ fc.weight^T + fc.bias (1008-way).
The float32 forward's deviation from the float64 one is recorded as `float32_rel_err`
(max |a - b| / max |b|) to show how much of the test's 1e-4 tolerance rounding alone uses.
"""

import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

import pytorch_fid
import pytorch_fid.inception as fid_inception

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def fnv1a64(name: str) -> np.uint64:
    h = 0xCBF29CE484222325
    for b in name.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return np.uint64(h)


def splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform(name: str, n: int, lo: float, hi: float) -> np.ndarray:
    with np.errstate(over="ignore"):
        idx = fnv1a64(name) + np.arange(n, dtype=np.uint64)
    u = (splitmix64(idx) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return (lo + (hi - lo) * u).astype(np.float32)


def generated(name: str, shape) -> torch.Tensor:
    n = int(np.prod(shape)) if len(shape) else 1
    if name.endswith("num_batches_tracked"):
        return torch.zeros(shape, dtype=torch.int64)
    if name.endswith(".conv.weight"):
        a = math.sqrt(6.0 / (shape[1] * shape[2] * shape[3]))
        lo, hi = -a, a
    elif name == "fc.weight":
        a = math.sqrt(3.0 / shape[1])
        lo, hi = -a, a
    elif name == "fc.bias":
        lo, hi = -0.1, 0.1
    elif name.endswith(".bn.weight"):
        lo, hi = 0.8, 1.2
    elif name.endswith(".bn.bias") or name.endswith(".bn.running_mean"):
        lo, hi = -0.2, 0.2
    elif name.endswith(".bn.running_var"):
        lo, hi = 0.5, 1.5
    else:
        raise SystemExit(f"no generator rule for tensor {name}")
    return torch.from_numpy(uniform(name, n, lo, hi).reshape(shape))


def image(n: int, c: int, h: int, w: int) -> np.ndarray:
    nn_, cc, yy, xx = np.meshgrid(np.arange(n), np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    v = (3 * xx * xx + 5 * yy + xx * yy + 11 * cc + 17 * nn_) % 23
    return (v / 11.0 - 1.0).astype(np.float32)


def main():
    torch.manual_seed(0)
    # The FID network's tensors have torchvision's Inception-v3 names and shapes (the FID
    # blocks only change forward passes); build that skeleton to list them.
    skeleton = fid_inception._inception_v3(num_classes=1008, aux_logits=False, weights=None)
    state = {k: generated(k, tuple(v.shape)) for k, v in skeleton.state_dict().items()}

    # pytorch-fid fetches its weights with load_state_dict_from_url: hand it ours instead.
    fid_inception.load_state_dict_from_url = lambda *args, **kwargs: dict(state)
    model = fid_inception.InceptionV3([3], resize_input=True, normalize_input=False).eval()

    # Activation scale per block (the generator's ranges keep them O(1)).
    with torch.no_grad():
        x = torch.from_numpy(image(2, 3, 32, 32)).double()
        x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
        m64 = model.double()
        for i, block in enumerate(m64.blocks):
            for layer in block:
                x = layer(x)
                print(f"block {i} {type(layer).__name__:16s} {tuple(x.shape)} rms {x.pow(2).mean().sqrt():.3f}")

    fc_w = state["fc.weight"].double().numpy()
    fc_b = state["fc.bias"].double().numpy()
    cases = []
    worst32 = 0.0
    for name, shape in [("rgb", (2, 3, 32, 32)), ("gray", (1, 1, 28, 28))]:
        x = torch.from_numpy(image(*shape))
        if shape[1] == 1:
            x = x.repeat(1, 3, 1, 1)
        with torch.no_grad():
            f64 = model.double()(x.double())[0].flatten(1).numpy()
            f32 = model.float()(x.float())[0].flatten(1).double().numpy()
        err32 = float(np.abs(f32 - f64).max() / np.abs(f64).max())
        worst32 = max(worst32, err32)
        logits = f64 @ fc_w.T + fc_b
        print(f"{name}: features rms {np.sqrt((f64**2).mean()):.4f} max {f64.max():.4f}, "
              f"logits rms {np.sqrt((logits**2).mean()):.4f}, float32 rel err {err32:.2e}")
        cases.append({
            "name": name,
            "shape": list(shape),
            "features": [[float(f"{v:.9g}") for v in row] for row in f64],
            "logits": [[float(f"{v:.9g}") for v in row] for row in logits],
        })

    out = {
        "about": "pytorch-fid FID Inception-v3 on generated weights; see scripts/make_inception_fixtures.py",
        "torch": torch.__version__,
        "pytorch_fid": pytorch_fid.__version__,
        "float32_rel_err": float(f"{worst32:.3e}"),
        "state_dict": [[k, list(v.shape), str(v.dtype).removeprefix("torch.")] for k, v in state.items()],
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "inception.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {os.path.normpath(path)} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
