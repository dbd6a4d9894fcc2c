#!/usr/bin/env bash
# Two lavapipe drivers measured whole with one wgdiff binary, as a user meets them on a fresh
# machine (BENCHMARKS.md, "Mesa 25's lavapipe against Mesa 22.3"): per driver, with an empty Mesa
# shader cache and an empty autotune cache each,
#   - `wgdiff sample` of the shipped U-Net (16 images, 50 steps) as a user runs it (kernels by
#     remembered choices or fixed rules), then with `--tune` (variants measured), each twice: the
#     first run compiles (and tunes), the second finds both caches filled (wall time, the
#     sampling time after the load, peak RSS);
#   - `wgdiff profile sample --preset mnist-small --steps 1` on another empty cache: each kernel's
#     first-use (compile) cost;
#   - on a filled autotune cache (the tuned paths): `bench mac` (the roof probes), `bench matmul`
#     (1024^3 and the U-Net's 4096x64x576), `bench conv --variants auto` (the conv ladder),
#     `bench train` of `mnist-mlp` (batch 128, the main job's step; also with the fixed rules) and
#     of `mnist` (batch 64): their training and sampling steps;
#   - the main job (`wgdiff train`, its defaults: 4.5 minutes of training): steps, wall, peak RSS.
# The drivers alternate round by round. A driver is the path of a Vulkan ICD file (lvp_icd.json)
# or `system`. To A/B without installing, `apt-get download` the other mesa-vulkan-drivers,
# `dpkg -x` it and write an ICD file whose library_path is its libvulkan_lvp.so (PLATFORM.md).
# Usage: scripts/driver-ab.sh DRIVER_A DRIVER_B [ROUNDS]   (needs `cargo build --release`)
# QUICK=1: only the user's sampling runs and the first-use profile (a few minutes a round);
# otherwise a round takes ~15 minutes a driver.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?usage: $0 DRIVER_A DRIVER_B [ROUNDS] (an lvp_icd.json path, or system)}
b=${2:?usage: $0 DRIVER_A DRIVER_B [ROUNDS]}
rounds=${3:-1}
bin=$PWD/target/release/wgdiff
export WGPU_BACKEND=vulkan
out=$(mktemp -d)
timed() { # label, command...: wall s, peak RSS MB, and the command's last lines
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$out/time" "$@" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
  read -r wall rss <"$out/time"
  printf '%-44s %8.1f s wall  %6d MB peak RSS  %s\n' "$label" "$wall" $((rss / 1024)) \
    "$(grep -E 'images with|pipelines created' "$out/log" | tr '\n' ' ')"
}
for round in $(seq "$rounds"); do
  for driver in "$a" "$b"; do
    if [ "$driver" = system ]; then unset VK_DRIVER_FILES; else export VK_DRIVER_FILES=$driver; fi
    echo "== round $round: $("$bin" info 2>/dev/null | sed -n 's/^driver: //p') ($(date -u +%T))"
    modes="default tuned"; [ -n "${QUICK:-}" ] && modes=default
    for mode in $modes; do
      export MESA_SHADER_CACHE_DIR=$out/mesa-$round-$mode WGDIFF_CACHE_DIR=$out/tune-$round-$mode
      rm -rf "$MESA_SHADER_CACHE_DIR" "$WGDIFF_CACHE_DIR"
      flag=""; [ $mode = tuned ] && flag=--tune
      for run in first second; do
        timed "sample, $mode, $run run" "$bin" sample $flag --count 16 --steps 50 --out "$out/s.png"
      done
    done
    export MESA_SHADER_CACHE_DIR=$out/mesa-$round-profile WGDIFF_CACHE_DIR=$out/tune-$round-profile
    "$bin" --deterministic profile sample --preset mnist-small --steps 1 2>/dev/null \
      | sed -n '/^first step (kernels/,/in all, over/p' | head -8
    [ -n "${QUICK:-}" ] && continue
    export MESA_SHADER_CACHE_DIR=$out/mesa-$round-tuned WGDIFF_CACHE_DIR=$out/tune-$round-tuned
    "$bin" bench mac --reps 3 2>/dev/null | sed '/^$/d'
    "$bin" bench matmul --shapes 1024x1024x1024,4096x64x576 --variants blocked --reps 5 2>/dev/null \
      | grep -E '^(variant|blocked)'
    "$bin" bench conv --variants auto --reps 3 2>/dev/null | grep -E '^(variant|auto|matmul) '
    for rule in "" --deterministic; do
      echo "bench train --preset mnist-mlp --batch 128 ${rule:-(tuned)}"
      "$bin" $rule bench train --preset mnist-mlp --batch 128 --reps 3 2>/dev/null \
        | grep -E '^(train-step|sample-step skip 0):'
    done
    echo "bench train --preset mnist --batch 64 (tuned)"
    "$bin" bench train --preset mnist --batch 64 --reps 3 2>/dev/null \
      | grep -E '^(train-step|sample-step skip 0|memory):'
    rm -rf "$out/main"
    timed "the main job (wgdiff train, defaults)" "$bin" train --out "$out/main"
    grep -E 'reached at step|^training took|MNIST-FID' "$out/log" | tail -3
  done
done
rm -rf "$out"
