#!/usr/bin/env python3
"""Samples a U-Net in the diffusers layout (a `wgdiff export --format diffusers` folder) with
diffusers' own pipelines and writes the images as PNGs, for `wgdiff eval --images DIR`: do
diffusers' samples of an export score as wgdiff's own do (same scheduler, same count)?

    python3 -m venv /tmp/pyenv && /tmp/pyenv/bin/pip install torch diffusers safetensors
    wgdiff export --format diffusers --checkpoint CKPT --out EXPORT
    /tmp/pyenv/bin/python scripts/diffusers_sample.py EXPORT --pipeline ddim --steps 50 --out DIR
    wgdiff eval --images DIR                       # against: wgdiff eval --checkpoint CKPT --sampler ddim --spacing trailing

`--pipeline ddpm`: `DDPMPipeline` with the export's `DDPMScheduler` (ancestral steps) and
`--spacing` (default `linspace`: T-1 down to 0 evenly, rounded, the nearest to wgdiff's `uniform`
spacing, which keeps the fractional timesteps; diffusers' own default `leading` starts at T - T/steps).
`--pipeline ddim`: `DDIMPipeline`, eta 0, with a `DDIMScheduler` made from the export's
scheduler config and `--spacing` (default `trailing`, wgdiff's `--sampler ddim --spacing
trailing`), the predicted x0 clipped and eps recomputed from it as wgdiff's samplers do
(`use_clipped_model_output`). Each batch draws its noise from `--seed` plus its first image's
index, so a longer run begins with a shorter one's images.
"""

import argparse
import pathlib
import time

import numpy as np
import torch
from diffusers import DDIMPipeline, DDIMScheduler, DDPMPipeline, DDPMScheduler, UNet2DModel
from PIL import Image


def pipeline(export, kind, spacing):
    """The diffusers pipeline of `kind` over the export's U-Net and scheduler config."""
    unet = UNet2DModel.from_pretrained(export).eval()
    ddpm = DDPMScheduler.from_pretrained(export)
    if kind == "ddpm":
        scheduler = DDPMScheduler.from_config(ddpm.config, timestep_spacing=spacing or "linspace")
        pipe = DDPMPipeline(unet=unet, scheduler=scheduler)
    else:
        scheduler = DDIMScheduler.from_config(ddpm.config, timestep_spacing=spacing or "trailing")
        pipe = DDIMPipeline(unet=unet, scheduler=scheduler)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=pathlib.Path, help="a diffusers-layout folder (config.json, weights, scheduler_config.json)")
    parser.add_argument("--pipeline", choices=["ddpm", "ddim"], default="ddpm", help="DDPMPipeline or DDIMPipeline (eta 0) [ddpm]")
    parser.add_argument("--steps", type=int, default=50, help="denoising steps [50]")
    parser.add_argument("--spacing", choices=["leading", "trailing", "linspace"], help="timestep spacing [ddpm: linspace, ddim: trailing]")
    parser.add_argument("--count", type=int, default=1000, help="images to write [1000]")
    parser.add_argument("--batch", type=int, default=100, help="images per pipeline call [100]")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first batch's noise [0]")
    parser.add_argument("--threads", type=int, help="torch threads [torch's default]")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="folder for the PNGs (00000.png, ...)")
    args = parser.parse_args()
    if args.count < 1 or args.batch < 1 or args.steps < 1:
        parser.error("--count, --batch and --steps must be at least 1")
    if not (args.export / "config.json").is_file():
        parser.error(f"{args.export} holds no config.json: pass a `wgdiff export --format diffusers` folder")
    if args.threads:
        torch.set_num_threads(args.threads)
    pipe = pipeline(args.export, args.pipeline, args.spacing)
    args.out.mkdir(parents=True, exist_ok=True)
    started, done = time.time(), 0
    while done < args.count:
        n = min(args.batch, args.count - done)
        call = dict(batch_size=n, generator=torch.Generator().manual_seed(args.seed + done),
                    num_inference_steps=args.steps, output_type="np")
        if args.pipeline == "ddim":
            call.update(eta=0.0, use_clipped_model_output=True)
        with torch.no_grad():
            images = pipe(**call).images  # (n, height, width, channels) in [0, 1]
        for i, image in enumerate(images):
            pixels = np.clip(np.round(image * 255.0), 0, 255).astype(np.uint8)
            Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels).save(args.out / f"{done + i:05d}.png")
        done += n
        print(f"{done}/{args.count} images in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
