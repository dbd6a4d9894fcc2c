#!/usr/bin/env bash
# Issue 69's benches on a machine with a GPU, beside PyTorch there, in one command that writes a
# JSON and a Markdown table (docs/benchmarks.md, "A real GPU in one call").
#
#   scripts/gpu-bench.sh prepare        # here: .gpu/ = a stripped release wgdiff (xz), the Vulkan
#                                       # loader's .deb, diffusers' wheels (what the GPU lacks)
#   scripts/gpu-bench.sh run [OUT]      # there, or here against lavapipe (QUICK=1: small shapes,
#                                       # one rep): OUT/gpu-bench.json, .md and .log
#
# With the device tool, after `prepare`: run(command="bash scripts/gpu-bench.sh run",
# carry=[".gpu"], timeout_s=540). The tracked tree and .gpu/ travel together (64 MiB at most:
# `prepare` prints what they come to). `run` keeps to GPU_BENCH_BUDGET_S seconds (default 450)
# by giving each bench what is left; a bench that fails or runs out of time is reported as such
# and the rest still run. PyTorch runs on the GPU (f32 with TF32 off; bf16 rows for reference)
# where it sees one, else on the CPU; without torch (or diffusers) the peers' rows are skipped.
# The binary run is $WGDIFF, else target/release/wgdiff, else the carried .gpu/wgdiff.xz.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
# This checkout's commit, and whether the code differs from it.
commit() {
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src shaders scripts Cargo.toml || echo ' with local changes')"
}
case "$mode" in
prepare)
  set -e
  mkdir -p .gpu/deb .gpu/whl
  cargo build --release
  echo "== the binary: stripped, xz-compressed"
  strip -o .gpu/wgdiff target/release/wgdiff
  xz -9 -T2 -f .gpu/wgdiff
  # (the machine gets no .git: the commit travels in a file)
  commit >.gpu/commit
  echo "== the Vulkan loader (libvulkan1), amd64, for a machine without one"
  rm -f .gpu/deb/*.deb
  lists=$(mktemp -d)
  mkdir -p "$lists/partial"
  apt_amd64=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists="$lists" -oAPT::Sandbox::User=root)
  apt-get "${apt_amd64[@]}" update -qq
  (cd .gpu/deb && apt-get "${apt_amd64[@]}" download -qq libvulkan1)
  rm -rf "$lists"
  echo "== diffusers and importlib_metadata wheels (the GPU image has torch and the rest)"
  rm -f .gpu/whl/*.whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl \
    diffusers==0.42.1 importlib_metadata
  tracked=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
  extra=$(du -sb .gpu | cut -f1)
  echo "== travels: the tracked tree $((tracked / 1024 / 1024)) MiB + .gpu/ $((extra / 1024 / 1024)) MiB = $(((tracked + extra) / 1024 / 1024)) MiB (the device tool takes 64)"
  exit 0
  ;;
run) ;;
*)
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac

out=${2:-${OUT:-runs/gpu-bench}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
budget=${GPU_BENCH_BUDGET_S:-450}
quick=${QUICK:-0}
log="$out/gpu-bench.log"
rows="$out/rows.jsonl"
steps="$out/steps.jsonl"
: >"$log"
: >"$rows"
: >"$steps"
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say() { echo "$*" | tee -a "$log"; }

# The binary: $WGDIFF, else this checkout's release build, else the carried one (a GPU machine
# gets no target/).
if [ -n "${WGDIFF:-}" ]; then
  wgdiff=$WGDIFF
elif [ -x target/release/wgdiff ]; then
  wgdiff=$(pwd)/target/release/wgdiff
elif [ -f .gpu/wgdiff.xz ]; then
  xz -dc .gpu/wgdiff.xz >"$work/wgdiff" 2>/dev/null ||
    python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' .gpu/wgdiff.xz >"$work/wgdiff"
  chmod +x "$work/wgdiff"
  wgdiff="$work/wgdiff"
else
  echo "no wgdiff: run \`cargo build --release\` (or \`$0 prepare\` for a GPU machine)" >&2
  exit 1
fi
# The Vulkan loader, where the machine has none (root only: it unpacks into /).
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1'; then
  if ls .gpu/deb/*.deb >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    for f in .gpu/deb/*.deb; do dpkg -x "$f" /; done
    ldconfig
    say "installed the carried Vulkan loader"
  else
    say "no Vulkan loader here (libvulkan.so.1) and none carried: wgdiff opens GL if it can"
  fi
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then
  export VK_DRIVER_FILES=$nvidia_icd
fi
# diffusers, where it was carried and is missing.
python=${PYTHON:-python3}
if ls .gpu/whl/*.whl >/dev/null 2>&1 && ! "$python" -c 'import diffusers' 2>/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$work/site" .gpu/whl/*.whl >>"$log" 2>&1 &&
    export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi
torch_device=none
if "$python" -c 'import torch' 2>/dev/null; then
  torch_device=cpu
  "$python" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null && torch_device=cuda
fi
has_diffusers=0
[ "$torch_device" != none ] && "$python" -c 'import diffusers' 2>/dev/null && has_diffusers=1
say "wgdiff: $wgdiff; PyTorch: $torch_device; diffusers: $([ $has_diffusers = 1 ] && echo yes || echo no); budget ${budget} s; QUICK=$quick"

# bench NAME CAP_S ARGS...: one wgdiff command (its --json lines tagged with NAME), within CAP_S
# seconds and what is left of the budget.
bench() {
  local name=$1 cap=$2
  shift 2
  local left=$((budget - ($(date +%s) - start)))
  local limit=$((cap < left ? cap : left))
  if [ "$limit" -lt 5 ]; then
    say "== $name: skipped, the budget is spent"
    printf '{"name":"%s","status":"skipped: budget spent","seconds":0}\n' "$name" >>"$steps"
    return 1
  fi
  say "== $name ($limit s at most): $*"
  local t0 rc
  t0=$(date +%s)
  timeout "$limit" "$@" >"$work/stdout" 2>>"$log"
  rc=$?
  local status=ok
  [ $rc = 124 ] && status="stopped at $limit s"
  [ $rc != 0 ] && [ $rc != 124 ] && status="failed (exit $rc)"
  grep '^{' "$work/stdout" | NAME=$name python3 -c '
import json, os, sys
for line in sys.stdin:
    row = json.loads(line)
    row["step"] = os.environ["NAME"]
    print(json.dumps(row))' >>"$rows"
  grep -v '^{' "$work/stdout" >>"$log"
  printf '{"name":"%s","status":"%s","seconds":%s,"command":%s}\n' "$name" "$status" "$(($(date +%s) - t0))" \
    "$(python3 -c 'import json, sys; print(json.dumps(" ".join(sys.argv[1:])))' "$@")" >>"$steps"
  say "   $status in $(($(date +%s) - t0)) s"
  return $rc
}

# peak LABEL ARGS...: one command's wall seconds and peak RSS, as a row of step sample-peak.
peak() {
  local label=$1
  shift
  local left=$((budget - ($(date +%s) - start)))
  [ "$left" -lt 5 ] && return
  say "== sample-peak ($label): $*"
  python3 - "$label" "$left" "$@" >>"$rows" 2>>"$log" <<'EOF'
import json, resource, subprocess, sys, time
label, limit, command = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
t = time.perf_counter()
try:
    ok = subprocess.run(command, stdout=subprocess.DEVNULL, timeout=limit).returncode == 0
except subprocess.TimeoutExpired:
    ok = False
if ok:
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"step": "sample-peak", "bench": "peak", "variant": label,
                      "wall_s": time.perf_counter() - t, "peak_rss_mib": rss}))
EOF
}

# What ran: the adapter wgdiff chose, the GPU, the CPU, the commit.
{
  timeout 60 "$wgdiff" info 2>&1 | grep -E '^(chosen|driver):'
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
  if [ "$wgdiff" = "$work/wgdiff" ] && [ -f .gpu/commit ]; then
    echo "commit: $(cat .gpu/commit)"
  elif git rev-parse HEAD >/dev/null 2>&1; then
    echo "commit: $(commit)"
  fi
  peers=$("$python" -c 'import torch; print("PyTorch", torch.__version__)' 2>/dev/null || echo none)
  [ $has_diffusers = 1 ] && peers="$peers, diffusers $("$python" -c 'import diffusers; print(diffusers.__version__)')"
  echo "peers: $peers (on: $torch_device)"
} >"$out/about.txt"
tee -a "$log" <"$out/about.txt"

if [ "$quick" = 1 ]; then
  # (kernels by the fixed rules: nothing tuned)
  export WGDIFF_DETERMINISTIC=1
  reps=1
  shapes=256x256x256,1024x64x144
  conv=(--variants auto --pass forward)
  train=(--batch 2 --sample-batch 1)
  step_batches=1
else
  reps=5
  shapes=1024x1024x1024,4096x64x576
  # (on a CPU adapter such as lavapipe 4096^3 takes seconds and a CIFAR-10 step at batch 16
  # ten: 3 rounds, no 4096^3, and give it GPU_BENCH_BUDGET_S=900)
  if grep -q '^chosen:.*Cpu)' "$out/about.txt"; then
    reps=3
  else
    shapes=$shapes,4096x4096x4096
  fi
  conv=(--variants auto --pass all)
  train=(--batch 64)
  step_batches=1,16
fi
torch=()
torch_bf16=()
if [ "$torch_device" != none ]; then
  torch=(--beside-torch "$python" --torch-device "$torch_device")
  [ "$torch_device" = cuda ] && torch_bf16=(--beside-torch "$python" --torch-device cuda-bf16)
fi

bench mac 60 "$wgdiff" bench mac --reps "$reps" --json
bench matmul 90 "$wgdiff" bench matmul --shapes "$shapes" --variants blocked --reps "$reps" --json "${torch[@]}"
bench conv 120 "$wgdiff" bench conv "${conv[@]}" --reps "$reps" --json "${torch[@]}"
bench train 90 "$wgdiff" bench train --preset mnist "${train[@]}" --reps "$reps" --json "${torch[@]}"
# The DDPM CIFAR-10 configuration (random weights): diffusers writes it where it is installed.
model=assets/models/mnist-small.safetensors
step_peer=()
if [ $has_diffusers = 1 ] && [ "$quick" != 1 ] &&
  "$python" scripts/diffusers_fixtures.py --make-cifar10 "$work" >>"$log" 2>&1; then
  model=$work/ddpm-cifar10
  step_peer=(--beside-diffusers "$python" --torch-device "$torch_device")
fi
bench step 150 "$wgdiff" bench step --checkpoint "$model" --batches "$step_batches" --reps "$reps" --json "${step_peer[@]}"
# Integer weights (item 4): the same model's int8 copy, its step and both peak RSS.
if bench int8-compress 60 "$wgdiff" compress --checkpoint "$model" --quantize int8 --out "$work/int8.safetensors" &&
  [ -f "$work/int8.safetensors" ]; then
  bench int8-step 60 "$wgdiff" bench step --checkpoint "$work/int8.safetensors" --batches 1 --reps "$reps" --json
  for m in f32:"$model" int8:"$work/int8.safetensors"; do
    peak "${m%%:*}" "$wgdiff" sample --checkpoint "${m#*:}" --count 1 --batch 1 --sampler ddim --steps 2 --out "$work/sample.png"
  done
fi
# For reference: PyTorch in bf16 beside the same wgdiff (f32) rows.
if [ ${#torch_bf16[@]} -gt 0 ]; then
  bench matmul-bf16 60 "$wgdiff" bench matmul --shapes "$shapes" --variants blocked --reps "$reps" --json "${torch_bf16[@]}"
  bench train-bf16 60 "$wgdiff" bench train --preset mnist "${train[@]}" --reps "$reps" --json "${torch_bf16[@]}"
fi

python3 scripts/gpu_bench_table.py "$out" "$(($(date +%s) - start))" | tee -a "$log" &&
  rm -f "$rows" "$steps" "$out/about.txt"
