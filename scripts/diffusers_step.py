"""One sampling step of a diffusers UNet2DModel (the network call and DDPMScheduler's update)
for `wgdiff bench step --beside-diffusers PYTHON` (which runs this file with the model folder
and `--torch-device`'s value as its arguments: cpu, cuda for f32 with TF32 off, cuda-bf16 for
the model in bf16): prints `ready <what it runs on>` once the model is loaded, then reads one
batch size per line on stdin and answers the seconds one step took at that size."""

import sys
import time

import diffusers
import torch
from diffusers import DDPMScheduler, UNet2DModel

folder = sys.argv[1]
where = sys.argv[2] if len(sys.argv) > 2 else "cpu"
if where not in ("cpu", "cuda", "cuda-bf16"):
    sys.exit(f"--torch-device {where!r}: cpu, cuda or cuda-bf16")
device = torch.device("cuda" if where != "cpu" else "cpu")
dtype = torch.bfloat16 if where == "cuda-bf16" else torch.float32
if device.type == "cuda":
    if not torch.cuda.is_available():
        sys.exit(f"--torch-device {where}: PyTorch {torch.__version__} at {sys.executable} sees no CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    on = f"CUDA {'f32 (TF32 off)' if dtype == torch.float32 else 'bf16'}, {torch.cuda.get_device_name()}"
else:
    on = f"CPU, {torch.get_num_threads()} threads"
unet = UNet2DModel.from_pretrained(folder, torch_dtype=dtype).to(device).eval()
scheduler = DDPMScheduler.from_pretrained(folder)
config = unet.config
generator = torch.Generator(device=device).manual_seed(0)
print(f"ready diffusers {diffusers.__version__}, PyTorch {torch.__version__} {on}", flush=True)


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()


for line in sys.stdin:
    batch = int(line)
    shape = (batch, config.in_channels, config.sample_size, config.sample_size)
    x = torch.randn(shape, generator=generator, device=device).to(dtype)
    labels = torch.zeros(batch, dtype=torch.int64, device=device) if config.num_class_embeds else None
    with torch.no_grad():
        sync()
        start = time.perf_counter()
        out = unet(x, 500, class_labels=labels).sample
        scheduler.step(out, 500, x, generator=generator)
        sync()
        seconds = time.perf_counter() - start
    print(seconds, flush=True)
