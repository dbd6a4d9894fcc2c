#!/usr/bin/env python3
"""Random-weight diffusers U-Nets in the diffusers layout, with diffusers' own outputs, for
wgdiff's import check (tests/engine/diffusers.rs and `scripts/diffusers_fixtures.py --check`).

Each model is a folder holding what `UNet2DModel.save_pretrained` and
`DDPMScheduler.save_pretrained` write (config.json, diffusion_pytorch_model.safetensors,
scheduler_config.json) plus `io.safetensors`: a fixed input batch (x, t, optional class labels)
and the U-Net's output on it as diffusers computes it (float32, CPU).

    python3 -m venv /tmp/pyenv && /tmp/pyenv/bin/pip install torch diffusers safetensors
    /tmp/pyenv/bin/python scripts/diffusers_fixtures.py            # the small committed models
    /tmp/pyenv/bin/python scripts/diffusers_fixtures.py --cifar10  # also the DDPM CIFAR-10 one

Configurations:
- `mnist-attn`: 1 channel, 28x28, block widths 16-32-32, 1 layer per block, attention at 14x14
  (head dim 8), 10 classes (`num_class_embeds`), diffusers' defaults for the time embedding
  (`flip_sin_to_cos` true, `freq_shift` 0) and norms (eps 1e-5); v-prediction, scaled_linear betas.
- `rgb64`: 3 channels, 64x64, block widths 16-32-48, 2 layers per block, attention at 16x16
  with one head (`attention_head_dim` null), DDPM's time embedding (`flip_sin_to_cos` false,
  `freq_shift` 1), norms eps 1e-6, `downsample_padding` 0; epsilon, squaredcos_cap_v2 betas.
- `ddpm-cifar10` (with --cifar10; 35.7M parameters, not committed): the configuration of the
  DDPM paper's CIFAR-10 model as published in the diffusers layout (Ho, Jain and Abbeel,
  "Denoising Diffusion Probabilistic Models"): widths 128-256-256-256, 2 layers per block,
  attention at 16x16, one head, linear betas 1e-4..0.02 over 1000 steps.
"""

import argparse
import json
import pathlib
import sys

try:
    import torch
    from diffusers import DDPMScheduler, UNet2DModel
    from safetensors.torch import save_file
except ImportError:
    sys.exit(
        "diffusers_fixtures.py needs PyTorch, diffusers and safetensors:\n"
        "    pip install torch diffusers safetensors"
    )

OUT = pathlib.Path("tests/fixtures/diffusers")

MODELS = {
    "mnist-attn": dict(
        unet=dict(
            sample_size=28,
            in_channels=1,
            out_channels=1,
            block_out_channels=(16, 32, 32),
            layers_per_block=1,
            down_block_types=("DownBlock2D", "AttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "AttnUpBlock2D", "UpBlock2D"),
            attention_head_dim=8,
            norm_num_groups=8,
            num_class_embeds=10,
        ),
        scheduler=dict(
            num_train_timesteps=1000,
            beta_schedule="scaled_linear",
            beta_start=0.00085,
            beta_end=0.012,
            prediction_type="v_prediction",
        ),
        batch=3,
        seed=1,
    ),
    "rgb64": dict(
        unet=dict(
            sample_size=64,
            in_channels=3,
            out_channels=3,
            block_out_channels=(16, 32, 48),
            layers_per_block=2,
            down_block_types=("DownBlock2D", "DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D", "UpBlock2D"),
            attention_head_dim=None,
            norm_num_groups=8,
            norm_eps=1e-6,
            flip_sin_to_cos=False,
            freq_shift=1,
            downsample_padding=0,
        ),
        scheduler=dict(
            num_train_timesteps=1000,
            beta_schedule="squaredcos_cap_v2",
            prediction_type="epsilon",
        ),
        batch=2,
        seed=2,
    ),
}

CIFAR10 = dict(
    unet=dict(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        block_out_channels=(128, 256, 256, 256),
        layers_per_block=2,
        down_block_types=("DownBlock2D", "AttnDownBlock2D", "DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D", "AttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=None,
        norm_num_groups=32,
        norm_eps=1e-6,
        flip_sin_to_cos=False,
        freq_shift=1,
        downsample_padding=0,
    ),
    scheduler=dict(
        num_train_timesteps=1000,
        beta_schedule="linear",
        beta_start=0.0001,
        beta_end=0.02,
        prediction_type="epsilon",
    ),
    batch=2,
    seed=3,
)


def randomize(model, generator):
    """Every parameter drawn at random (diffusers zero-initialises no layer here, but GroupNorm
    scales start at 1 and biases at 0, which would hide a swapped scale and shift)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.5 if name.endswith("bias") or "norm" in name else (1.0 / max(p[0].numel(), 1)) ** 0.5
            p.copy_(torch.randn(p.shape, generator=generator) * scale + (1.0 if "norm" in name and name.endswith("weight") else 0.0))


def make(name, spec, root):
    generator = torch.Generator().manual_seed(spec["seed"])
    torch.manual_seed(spec["seed"])
    unet = UNet2DModel(**spec["unet"]).eval()
    randomize(unet, generator)
    folder = root / name
    unet.save_pretrained(folder, safe_serialization=True)
    DDPMScheduler(**spec["scheduler"]).save_pretrained(folder)
    cfg = unet.config
    n, size = spec["batch"], cfg.sample_size
    x = torch.randn((n, cfg.in_channels, size, size), generator=generator)
    t = torch.tensor([999, 500, 3, 250][:n], dtype=torch.int64)
    tensors = {"x": x, "t": t.to(torch.float32)}
    labels = None
    if cfg.num_class_embeds:
        labels = torch.tensor([7, 0, 3, 9][:n], dtype=torch.int64)
        tensors["labels"] = labels.to(torch.float32)
    with torch.no_grad():
        out = unet(x, t, class_labels=labels).sample
    tensors["out"] = out
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "io.safetensors"))
    params = sum(p.numel() for p in unet.parameters())
    print(f"{folder}: {params:,} parameters, output max |y| {out.abs().max().item():.4g}")
    return folder


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=OUT, help="where the model folders go")
    parser.add_argument("--cifar10", action="store_true", help="also the 35.7M-parameter DDPM CIFAR-10 model")
    args = parser.parse_args()
    for name, spec in MODELS.items():
        make(name, spec, args.out)
    if args.cifar10:
        make("ddpm-cifar10", CIFAR10, args.out)
    (args.out / "README.md").write_text(
        "Random-weight diffusers `UNet2DModel`s with diffusers' outputs on a fixed batch\n"
        "(`io.safetensors`), made by `scripts/diffusers_fixtures.py` with "
        f"torch {torch.__version__} and diffusers {__import__('diffusers').__version__}.\n"
    )


if __name__ == "__main__":
    main()
