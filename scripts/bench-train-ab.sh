#!/usr/bin/env bash
# A/B of `wgdiff bench train` between two wgdiff binaries (say, the commit before a change and
# after it), alternating round by round, each run after a blocked 1024^3 matmul ceiling and
# under /usr/bin/time -v (peak RSS). Build the old one with e.g.
#   git worktree add /tmp/old <commit> && (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release --no-default-features)
# Usage: scripts/bench-train-ab.sh OLD_BINARY NEW_BINARY [ROUNDS] [extra bench train flags...]
set -euo pipefail
old=${1:?usage: $0 OLD_BINARY NEW_BINARY [ROUNDS] [bench train flags]}
new=${2:?usage: $0 OLD_BINARY NEW_BINARY [ROUNDS] [bench train flags]}
rounds=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
for bin in "$old" "$new"; do
  # one untimed run each, so both autotune caches are warm before timing
  "$bin" bench train --reps 1 --warmup 0 "$@" >/dev/null 2>&1
done
for round in $(seq "$rounds"); do
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    echo "== round $round: $which ($bin), $(date -u +%FT%TZ)"
    "$bin" bench matmul --shapes 1024x1024x1024 --variants blocked --reps 3 2>/dev/null | grep -E '^blocked'
    /usr/bin/time -v "$bin" bench train --reps 3 "$@" 2>&1 |
      grep -E '^(train-step|sample-step skip 0|memory:)|Maximum resident'
  done
done
