#!/usr/bin/env bash
# The page's end-to-end test: builds the site (web/build.sh), installs playwright-core (npm),
# and runs web/test/page.mjs in headless Chromium against the native build's `wgdiff sample`.
# Needs: chromium (/usr/bin/chromium), node + npm, wasm-bindgen-cli (see web/build.sh), and
# target/release/wgdiff (cargo build --release). Screenshots and figures: web/test/out.
# SITE=DIR web/test.sh: tests the site web/build.sh already wrote into DIR instead of building
# one (.ci/run builds it first, then runs this test in the background).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${SITE:-}" ]; then
  site=$SITE
  [ -f "$site/pkg/wgdiff_web_bg.wasm" ] || { echo "web/test.sh: $site holds no site (web/build.sh $site writes one)" >&2; exit 1; }
else
  site=$(mktemp -d)
  trap 'rm -rf "$site"' EXIT
  web/build.sh "$site"
fi
(cd web/test && npm ci --no-audit --no-fund --silent)
SITE="$site" node web/test/page.mjs
