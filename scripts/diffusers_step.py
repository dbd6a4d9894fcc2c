"""One sampling step of a diffusers UNet2DModel (the network call and DDPMScheduler's update)
on PyTorch's CPU, for `wgdiff bench step --beside-diffusers PYTHON` (which runs this file with
the model folder as its argument): prints `ready` once the model is loaded, then reads one batch
size per line on stdin and answers the seconds one step took at that size."""

import sys
import time

import torch
from diffusers import DDPMScheduler, UNet2DModel

folder = sys.argv[1]
unet = UNet2DModel.from_pretrained(folder).eval()
scheduler = DDPMScheduler.from_pretrained(folder)
config = unet.config
generator = torch.Generator().manual_seed(0)
print("ready", flush=True)
for line in sys.stdin:
    batch = int(line)
    x = torch.randn((batch, config.in_channels, config.sample_size, config.sample_size), generator=generator)
    labels = torch.zeros(batch, dtype=torch.int64) if config.num_class_embeds else None
    with torch.no_grad():
        start = time.perf_counter()
        out = unet(x, 500, class_labels=labels).sample
        scheduler.step(out, 500, x, generator=generator)
        seconds = time.perf_counter() - start
    print(seconds, flush=True)
