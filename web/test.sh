#!/usr/bin/env bash
# The page's end-to-end test: builds the site (web/build.sh), installs playwright-core (npm),
# and runs web/test/page.mjs in headless Chromium against the native build's `wgdiff sample`.
# Needs: chromium (/usr/bin/chromium), node + npm, wasm-bindgen-cli (see web/build.sh), and
# target/release/wgdiff (cargo build --release). Screenshots and figures: web/test/out.
set -euo pipefail
cd "$(dirname "$0")/.."
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
web/build.sh "$site"
(cd web/test && npm ci --no-audit --no-fund --silent)
SITE="$site" node web/test/page.mjs
