#!/usr/bin/env bash
# `wgdiff bench app` on a machine without a display: starts Xvfb, then runs the app's training
# job against `wgdiff train` on the same settings in alternating rounds (steps per second of
# each, their ratio, the app's frame intervals). Arguments go to `wgdiff bench app`, e.g.
#   scripts/bench-app.sh --steps 80 --rounds 5
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! command -v Xvfb >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq xvfb >/dev/null
fi
cargo build --release --quiet
display=:${WGDIFF_XVFB_DISPLAY:-98}
Xvfb "$display" -screen 0 1280x900x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null || true' EXIT
export DISPLAY=$display
unset WAYLAND_DISPLAY
sleep 1
target/release/wgdiff bench app "$@"
