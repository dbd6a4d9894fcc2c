#!/usr/bin/env bash
# Serves a site built by web/build.sh on http://127.0.0.1:${PORT:-8000} (loopback only).
set -euo pipefail
cd "$(dirname "$0")/.."
exec node web/serve.mjs "${1:-web/dist}" "${PORT:-8000}"
