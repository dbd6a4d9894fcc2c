#!/usr/bin/env bash
# `wgdiff bench app` on a machine without a display: starts Xvfb, then runs the app's training
# job against `wgdiff train` on the same settings in alternating rounds (steps per second of
# each, their ratio, the app's frame intervals). Arguments go to `wgdiff bench app`, e.g.
#   scripts/bench-app.sh --steps 80 --rounds 5
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/xvfb.sh target/release/wgdiff bench app "$@"
