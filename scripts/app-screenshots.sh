#!/usr/bin/env bash
# Screenshots of `wgdiff gui` under Xvfb on the engine's device (lavapipe on a machine without
# a GPU) and the app's frame-time logs while it samples and while it trains:
#   docs/app-denoise.png   the denoise view mid-run (the shipped model, digits forming)
#   docs/app-train.png     the train view with a live loss curve (the default recipe)
#   docs/app-profile.png   the profile view with the per-op table and the roofline
#   docs/app-skip.png      the skip view with the shipped searched schedule over k(t)
#   docs/app-compare.png   the compare view: DDPM 20 steps against DDIM 10 on one seed
#   docs/app-paused.png    the denoise view paused after step 12 of 20, the step debugger below
#   docs/app-experiments.png the experiments view after the compression experiment at a toy size
#   <out>/frames-*.csv     every frame's interval (--frame-log); the app prints the percentiles
# and, last, one round of `wgdiff bench app` (the train view against `wgdiff train`).
# Usage: scripts/app-screenshots.sh [OUT_DIR] [--quick]   (default docs)
# --quick (CI, into a temp folder): the app in a real window (eframe, winit and the surface on
# Xvfb, which the kittest harness of tests/app does not reach) sampling and training, with their
# frame logs; the other views, which tests/app drives through the same code (skip, compare, the
# step debugger, profile, experiments, the training job of `bench app`), are left out, and
# kernels are chosen by fixed rules (WGDIFF_DETERMINISTIC=1: no minutes of timing the kernel
# variants of every new shape on a fresh machine): ~1 minute instead of ~17 on lavapipe.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs}
quick=${2:-}
case "$quick" in
  "" | --quick) ;;
  *) echo "usage: scripts/app-screenshots.sh [OUT_DIR] [--quick]" >&2; exit 2 ;;
esac
mkdir -p "$out"
if [ -n "$quick" ]; then export WGDIFF_DETERMINISTIC=1; fi
# (under a virtual display: scripts/xvfb.sh installs Xvfb when missing, builds, starts it and
# runs this script again inside)
if [ -z "${WGDIFF_UNDER_XVFB:-}" ]; then
  WGDIFF_UNDER_XVFB=1 exec scripts/xvfb.sh "$PWD/scripts/app-screenshots.sh" "$@"
fi
bin=target/release/wgdiff

echo "== denoise view: the shipped model sampling, 50 DDPM steps"
$bin gui --view denoise --autorun --screenshot "$out/app-denoise.png" \
  --frame-log "$out/frames-sampling.csv"
echo "== train view: the default recipe training live (a grid every 3 steps for the picture)"
$bin gui --view train --set sample-every=3 --autorun --out "${TMPDIR:-/tmp}/wgdiff-app-run" --screenshot "$out/app-train.png" \
  --frame-log "$out/frames-training.csv"
if [ -n "$quick" ]; then exit 0; fi
echo "== skip view: the shipped searched schedule over k(t), FLOPs per skip depth"
$bin gui --view skip --set schedule=assets/schedules/mnist-small-skip-zero-ddpm20-budget10.json \
  --screenshot "$out/app-skip.png"
echo "== compare view: DDPM 20 steps against DDIM 10, MNIST-FID over 50 images each"
$bin gui --view compare --set fid-samples=50 --autorun --screenshot "$out/app-compare.png"
echo "== denoise view paused after step 12 of 20 (the step debugger)"
$bin gui --view denoise --set steps=20 --set pause-after=12 --autorun --out "${TMPDIR:-/tmp}/wgdiff-app-paused" \
  --screenshot "$out/app-paused.png"
echo "== profile view: a training step of mnist-small, its roofline"
$bin gui --view profile --autorun --screenshot "$out/app-profile.png"
echo "== experiments view: the compression experiment at a toy size (8 images per MNIST-FID, 2 steps)"
$bin gui --view experiments --set experiment=compression --set samples=8 --set steps=2 \
  --set out="${TMPDIR:-/tmp}/wgdiff-app-experiment" --autorun --screenshot "$out/app-experiments.png"
echo "== the app's training job against the CLI's: wgdiff bench app (one round of 12 steps)"
$bin bench app --steps 12 --rounds 1 --skip 2
