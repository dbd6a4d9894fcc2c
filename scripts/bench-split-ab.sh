#!/usr/bin/env bash
# A/B of the blocked matmul and the tiled conv with the rows' operand split across the
# subgroup (A) or read in every lane (B), same binary, same tiles: the autotuner's choices are
# measured once into cache A, cache B is A without the split, then rounds alternate A and B
# (`WGDIFF_CACHE_DIR`), each timing the FMA probe, the matmul and the tiled conv.
# Usage: scripts/bench-split-ab.sh [ROUNDS] (default 2); needs `cargo build --release` first, of
# commit 7ed1bfa or 76fe0b6: there the autotuner offers both forms; since then a tile's split
# form replaces it where the adapter has 8-lane subgroups, so cache B's plain labels are not
# candidates any more (the script stops when B's choices come back split).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
bin=target/release/wgdiff
dir=$(mktemp -d)
mkdir -p "$dir/A" "$dir/B"
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
benches() {
  "$bin" bench mac --reps 3 2>&1 | grep '^fma-f32'
  "$bin" bench matmul --shapes 1024x1024x1024,4096x64x576 --variants blocked --reps 5 2>&1 | grep '^blocked'
  "$bin" bench conv --variants tiled --pass both --reps 3 2>&1 | grep '^tiled'
}
WGDIFF_CACHE_DIR="$dir/A" benches >/dev/null
for f in "$dir"/A/*.json; do sed 's/, rows split across the subgroup//' "$f" >"$dir/B/$(basename "$f")"; done
for round in $(seq "$rounds"); do
  for arm in A B; do
    echo "== round $round arm $arm ($(date -u +%T))"
    WGDIFF_CACHE_DIR="$dir/$arm" benches
    if [ "$arm" = B ] && grep -q 'split across' "$dir"/B/*.json; then
      echo "this build offers only the split tiles here: build commit 7ed1bfa for the A/B" >&2
      exit 1
    fi
  done
done
rm -rf "$dir"
