#!/usr/bin/env python3
"""Random-weight diffusers U-Nets in the diffusers layout, with diffusers' own outputs, for
wgdiff's import check (tests/engine/diffusers.rs and `scripts/diffusers_fixtures.py --check`).

Each model is a folder holding what `UNet2DModel.save_pretrained` and
`DDPMScheduler.save_pretrained` write (config.json, diffusion_pytorch_model.safetensors,
scheduler_config.json) plus `io.safetensors`: a fixed input batch (x, t, optional class labels)
and the U-Net's output on it as diffusers computes it (float32, CPU), and a deterministic DDIM
run by diffusers' `DDIMScheduler` (eta 0, 10 `trailing` timesteps, the predicted x0 clipped to
[-1, 1] and eps recomputed from it as wgdiff's samplers do: `use_clipped_model_output`): its
initial noise `ddim_x`, timesteps `ddim_t` and the state after every step `ddim_steps`.

    python3 -m venv /tmp/pyenv && /tmp/pyenv/bin/pip install torch diffusers safetensors
    /tmp/pyenv/bin/python scripts/diffusers_fixtures.py            # the small committed models
    /tmp/pyenv/bin/python scripts/diffusers_fixtures.py --cifar10  # the DDPM CIFAR-10 one, checked
    /tmp/pyenv/bin/python scripts/diffusers_fixtures.py --check-exports
    python3 scripts/diffusers_fixtures.py --make-cifar10 DIR  # the CIFAR-10 folder alone (scripts/gpu-bench.sh)

`--cifar10` makes the 35.7M-parameter model in a temporary folder (`--cifar10-dir`) and runs
wgdiff's check on it (`cargo test --release --test engine -- --ignored made_by_the_script`: the
forward within 1e-4, the DDIM run within 1e-3 at every step). `--check-exports` has
`wgdiff export --format diffusers` write the committed models, the CIFAR-10 one when it exists,
and wgdiff-made U-Nets (a class-conditional one and the `mnist` and `mnist-small` presets;
tests/engine/diffusers.rs writes them with wgdiff's output) back in the
diffusers layout, loads each with `UNet2DModel.from_pretrained` (no missing, unexpected or
mismatched tensors) and `DDPMScheduler.from_pretrained`, and compares diffusers' output on the
fixed batch with the one in `io.safetensors` (wgdiff's, or diffusers' on the original model,
which wgdiff's forward matches).

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
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

try:
    import torch
    from diffusers import DDIMScheduler, DDPMScheduler, UNet2DModel
    from safetensors.torch import load_file, save_file
except ImportError:
    sys.exit(
        "diffusers_fixtures.py needs PyTorch, diffusers and safetensors:\n"
        "    pip install torch diffusers safetensors"
    )

OUT = pathlib.Path("tests/fixtures/diffusers")

# What the three models share; each one's entry below says what differs.
BASE_UNET = dict(
    sample_size=28,
    in_channels=1,
    out_channels=1,
    layers_per_block=1,
    norm_num_groups=8,
)
BASE_SCHEDULER = dict(num_train_timesteps=1000, prediction_type="epsilon")
# DDPM's own time embedding and norms (diffusers' defaults are flip_sin_to_cos true, freq_shift 0,
# eps 1e-5, downsample padding 1).
DDPM_STYLE = dict(norm_eps=1e-6, flip_sin_to_cos=False, freq_shift=1, downsample_padding=0)


def spec(unet, scheduler, batch, seed):
    return dict(unet={**BASE_UNET, **unet}, scheduler={**BASE_SCHEDULER, **scheduler}, batch=batch, seed=seed)


MODELS = {
    "mnist-attn": spec(
        unet=dict(
            block_out_channels=(16, 32, 32),
            down_block_types=("DownBlock2D", "AttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "AttnUpBlock2D", "UpBlock2D"),
            attention_head_dim=8,
            num_class_embeds=10,
        ),
        scheduler=dict(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, prediction_type="v_prediction"),
        batch=3,
        seed=1,
    ),
    "rgb64": spec(
        unet=dict(
            sample_size=64,
            in_channels=3,
            out_channels=3,
            block_out_channels=(16, 32, 48),
            layers_per_block=2,
            down_block_types=("DownBlock2D", "DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D", "UpBlock2D"),
            attention_head_dim=None,
            **DDPM_STYLE,
        ),
        scheduler=dict(beta_schedule="squaredcos_cap_v2"),
        batch=2,
        seed=2,
    ),
}

CIFAR10 = spec(
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
        **DDPM_STYLE,
    ),
    scheduler=dict(beta_schedule="linear", beta_start=0.0001, beta_end=0.02),
    batch=2,
    seed=3,
)

DDIM_STEPS = 10


def randomize(model, generator):
    """Every parameter drawn at random (diffusers zero-initialises no layer here, but GroupNorm
    scales start at 1 and biases at 0, which would hide a swapped scale and shift)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.5 if name.endswith("bias") or "norm" in name else (1.0 / max(p[0].numel(), 1)) ** 0.5
            p.copy_(torch.randn(p.shape, generator=generator) * scale + (1.0 if "norm" in name and name.endswith("weight") else 0.0))


def ddim_run(unet, scheduler_config, x, labels):
    """diffusers' DDIMScheduler loop from `x`: its timesteps and every step's state."""
    scheduler = DDIMScheduler.from_config(
        scheduler_config, timestep_spacing="trailing", steps_offset=0, set_alpha_to_one=True, clip_sample=True
    )
    scheduler.set_timesteps(DDIM_STEPS)
    states = []
    with torch.no_grad():
        for t in scheduler.timesteps:
            out = unet(x, t, class_labels=labels).sample
            x = scheduler.step(out, t, x, eta=0.0, use_clipped_model_output=True).prev_sample
            states.append(x)
    return scheduler.timesteps, torch.stack(states)


def make_model(name, spec, root):
    """The folder `root/name` of a random-weight model: what from_pretrained loads, no outputs.
    Returns the model, its scheduler, the folder and the generator that drew the weights."""
    generator = torch.Generator().manual_seed(spec["seed"])
    torch.manual_seed(spec["seed"])
    unet = UNet2DModel(**spec["unet"]).eval()
    randomize(unet, generator)
    folder = root / name
    unet.save_pretrained(folder, safe_serialization=True)
    ddpm = DDPMScheduler(**spec["scheduler"])
    ddpm.save_pretrained(folder)
    return unet, ddpm, folder, generator


def make(name, spec, root):
    unet, ddpm, folder, generator = make_model(name, spec, root)
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
    noise = torch.randn(x.shape, generator=generator)
    timesteps, states = ddim_run(unet, ddpm.config, noise, labels)
    tensors.update(ddim_x=noise, ddim_t=timesteps.to(torch.float32), ddim_steps=states)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "io.safetensors"))
    params = sum(p.numel() for p in unet.parameters())
    print(f"{folder}: {params:,} parameters, output max |y| {out.abs().max().item():.4g}")
    return folder


def relative_error(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def run(*command, env=None):
    print("$", " ".join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], check=True, env=env)


def check_cifar10(folder):
    """wgdiff's forward and DDIM run on the model in `folder` against diffusers' (a Rust test)."""
    env = dict(os.environ, WGDIFF_DIFFUSERS_MODEL=str(folder.resolve()))
    run("cargo", "test", "--release", "--test", "engine", "--", "--ignored", "--nocapture", "made_by_the_script", env=env)


def check_exports(cifar10_dir):
    """Every export loads in diffusers and gives the output its io.safetensors holds."""
    sources = [OUT / name for name in MODELS]
    if (cifar10_dir / "ddpm-cifar10").is_dir():
        sources.append(cifar10_dir / "ddpm-cifar10")
    # (writes target/tmp/diffusers-export-{native,mnist,mnist-small}: wgdiff U-Nets exported, a
    # class-conditional one and the `mnist` and `mnist-small` presets, with wgdiff's output)
    run("cargo", "test", "--release", "--test", "engine", "a_wgdiff_unet_exports")
    exports = [pathlib.Path("target/tmp") / f"diffusers-export-{name}" for name in ("native", "mnist", "mnist-small")]
    root = pathlib.Path(tempfile.mkdtemp(prefix="wgdiff-exports-"))
    for source in sources:
        out = root / source.name
        run("target/release/wgdiff", "export", "--format", "diffusers", "--checkpoint", source, "--out", out)
        shutil.copy(source / "io.safetensors", out / "io.safetensors")
        exports.append(out)
    worst = 0.0
    for folder in exports:
        unet, info = UNet2DModel.from_pretrained(folder, output_loading_info=True)
        problems = {k: v for k, v in info.items() if v}
        if problems:
            sys.exit(f"{folder}: diffusers loaded it with {problems}")
        DDPMScheduler.from_pretrained(folder)
        io = load_file(str(folder / "io.safetensors"))
        labels = io["labels"].to(torch.int64) if "labels" in io else None
        with torch.no_grad():
            out = unet.eval()(io["x"], io["t"].to(torch.int64), class_labels=labels).sample
        error = relative_error(out, io["out"])
        worst = max(worst, error)
        print(f"{folder}: loads in diffusers; max |diffusers - reference| / max |reference| = {error:.2e}")
    if worst > 1e-4:
        sys.exit(f"an export's output differs by {worst:.2e} (allowed 1e-4)")
    shutil.rmtree(root)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cifar10", action="store_true", help="make the 35.7M-parameter DDPM CIFAR-10 model and check wgdiff on it")
    parser.add_argument("--cifar10-dir", type=pathlib.Path, default=pathlib.Path(tempfile.gettempdir()) / "wgdiff-diffusers",
                        help="where the CIFAR-10 model goes (default: %(default)s)")
    parser.add_argument("--check-exports", action="store_true", help="check wgdiff's exports in diffusers")
    parser.add_argument("--make-cifar10", type=pathlib.Path, metavar="DIR",
                        help="only write the CIFAR-10 model's folder, DIR/ddpm-cifar10 (no outputs, no check)")
    args = parser.parse_args()
    if args.make_cifar10:
        folder = make_model("ddpm-cifar10", CIFAR10, args.make_cifar10)[2]
        print(f"{folder}: the DDPM CIFAR-10 configuration, random weights")
        return
    if args.cifar10:
        check_cifar10(make("ddpm-cifar10", CIFAR10, args.cifar10_dir))
    if args.check_exports:
        check_exports(args.cifar10_dir)
    if args.cifar10 or args.check_exports:
        return
    for name, spec in MODELS.items():
        make(name, spec, OUT)
    (OUT / "README.md").write_text(
        "Random-weight diffusers `UNet2DModel`s with diffusers' outputs on a fixed batch and a DDIM run\n"
        "(`io.safetensors`), made by `scripts/diffusers_fixtures.py` with "
        f"torch {torch.__version__} and diffusers {__import__('diffusers').__version__}.\n"
    )


if __name__ == "__main__":
    main()
