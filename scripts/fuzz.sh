#!/usr/bin/env bash
# Fuzzes every loader (IDX, CIFAR-10, image-folder files, checkpoints, TOML configs, --data
# strings) for MINUTES each (default 10) with seeded mutations of valid inputs, two loaders at a
# time, and reports cases, errors and panics per loader. A case that kills the process (abort,
# out of memory) is reported with the seed that replays it:
#   WGDIFF_FUZZ_SEED=<seed> cargo test --release --test engine -- --ignored fuzz_long_<loader>
set -uo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
export WGDIFF_FUZZ_SECONDS=$((minutes * 60))
cargo test --release --test engine --no-run 2>&1 | tail -1
rm -f "${TMPDIR:-/tmp}"/wgdiff-fuzz-*.seed
loaders="idx cifar image_folder checkpoint toml_config data_strings"
log=$(mktemp -d)
run() {
  cargo test -q --release --test engine -- --ignored --exact "fuzz::fuzz_long_$1" --nocapture \
    >"$log/$1.out" 2>&1
  echo $? >"$log/$1.rc"
}
set -- $loaders
while [ $# -gt 0 ]; do
  run "$1" &
  [ $# -gt 1 ] && run "$2" &
  wait
  shift; [ $# -gt 0 ] && shift
done
failed=0
for l in $loaders; do
  line=$(grep -h '^fuzz ' "$log/$l.out")
  if [ "$(cat "$log/$l.rc")" = 0 ] && [ -n "$line" ]; then
    echo "$line"
  else
    failed=1
    echo "fuzz $l: FAILED (exit $(cat "$log/$l.rc")); last lines:"
    tail -5 "$log/$l.out" | sed 's/^/  /'
    ls "${TMPDIR:-/tmp}"/wgdiff-fuzz-*.seed 2>/dev/null | while read -r f; do
      echo "  case running when it died: $(basename "$f" .seed) seed $(cat "$f")"
    done
  fi
done
exit $failed
