#!/usr/bin/env bash
# The soak (not a CI step): `wgdiff bench soak` under Xvfb (an hour of the app's train view
# training with grids and MNIST-FID every few minutes, then 500 sampling runs back to back in
# the denoise view, each with a soak log and a verdict), then with --page the page's own:
# 20 minutes of training in headless Chromium, its JS heap, wasm heap and buffer pool sampled
# every minute (web/test/soak.mjs). Arguments go to `wgdiff bench soak`, e.g.
#   scripts/soak.sh                       scripts/soak.sh --train-minutes 10 --runs 50
#   scripts/soak.sh --page                (the page's soak only; needs what web/test.sh needs)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--page" ]; then
  site=$(mktemp -d)
  trap 'rm -rf "$site"' EXIT
  web/build.sh "$site"
  (cd web/test && npm ci --no-audit --no-fund --silent)
  SITE="$site" node web/test/soak.mjs
  exit 0
fi
scripts/xvfb.sh target/release/wgdiff bench soak "$@"
