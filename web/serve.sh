#!/usr/bin/env bash
# Serves a site built by web/build.sh on http://127.0.0.1:${PORT:-8000} (loopback only).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m http.server "${PORT:-8000}" --bind 127.0.0.1 --directory "${1:-web/dist}"
