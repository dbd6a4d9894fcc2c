#!/usr/bin/env bash
# Runs a command under a virtual display (Xvfb, installed when missing) after a release build:
# how the app's screenshots, benches and soaks run on a machine without a display.
#   scripts/xvfb.sh target/release/wgdiff bench app --steps 80
# WGDIFF_XVFB_DISPLAY picks the display number (default 98).
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
"$@"
