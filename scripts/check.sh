#!/usr/bin/env bash
# The contributor's check after each step (README, "Contributing"; <= 10 minutes on 2 cores
# with a warm target folder): format, lints, the library's unit tests, and the engine tests of
# what changed, named by their test files (tests/engine/<name>.rs), e.g.
#   scripts/check.sh conv matmul      # format, lints, unit tests, tests/engine/{conv,matmul}.rs
#   scripts/check.sh                  # format, lints, unit tests only
# `bash .ci/run` (what CI runs: every test, the app, the page, the cross-target builds) is the
# full check before landing.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
echo "== format"
cargo fmt --all -- --check
echo "== lints (cargo clippy --release --all-targets; CI adds --features mpi)"
cargo clippy -q --release --all-targets -- -D warnings
echo "== unit tests"
cargo test -q --release --lib
for name in "$@"; do
  if [ ! -f "tests/engine/$name.rs" ]; then
    echo "no tests/engine/$name.rs: name test files of tests/engine/ ($(ls tests/engine | sed 's/\.rs$//' | tr '\n' ' '))" >&2
    exit 2
  fi
done
if [ $# -gt 0 ]; then
  echo "== engine tests of: $*"
  cargo test -q --release --test engine -- $(printf '%s:: ' "$@")
fi
echo "== check passed in $(( $(date +%s) - start )) s"
