#!/usr/bin/env bash
# Builds the wgdiff page into a static site folder (default web/dist): the app compiled to
# wasm32 with its JS glue (wasm-bindgen-cli at the version in Cargo.lock), web/index.html,
# and the files the page fetches (the shipped model's EMA-only export, the MNIST classifier of
# MNIST-FID and its test-split statistics, the NCSN ScoreNet of the compression experiment,
# MNIST's test split, the shipped schedule files).
#   web/build.sh [OUT]        then: web/serve.sh [OUT]   (http://127.0.0.1:8000)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-web/dist}"
want=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  echo "web/build.sh needs wasm-bindgen-cli $want (found: ${have:-none}):" >&2
  echo "  cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi
cargo build --release -p wgdiff-web --target wasm32-unknown-unknown
# (where cargo put it: CARGO_TARGET_DIR when set)
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$out/assets/models" "$out/assets/mnist" "$out/assets/schedules"
wasm-bindgen --target web --no-typescript --out-dir "$out/pkg" \
  "$target/wasm32-unknown-unknown/release/wgdiff_web.wasm"
cp web/index.html "$out/"
cp assets/models/mnist-small.safetensors assets/models/mnist-classifier.safetensors \
  assets/models/mnist-classifier-test-stats.safetensors assets/models/ncsn-mnist.safetensors \
  "$out/assets/models/"
cp assets/schedules/*.json "$out/assets/schedules/"
cp assets/mnist/t10k-images.idx3-ubyte.gz assets/mnist/t10k-labels.idx1-ubyte.gz "$out/assets/mnist/"
echo "wrote $out ($(du -sh "$out" | cut -f1)); serve it with web/serve.sh $out"
