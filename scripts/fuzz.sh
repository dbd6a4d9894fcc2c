#!/usr/bin/env bash
# Usage: scripts/fuzz.sh [MINUTES] ["LOADERS"]
# Fuzzes every loader (idx, cifar, image_folder, checkpoint, compressed_checkpoint,
# schedule_file, toml_config, data_strings, diffusers; or the LOADERS named, e.g. "idx checkpoint") for
# MINUTES each (default 10) with seeded mutations of valid inputs, two loaders at a time, and
# reports cases, errors and panics per loader. A case that kills the process (abort, out of
# memory) is reported with the seed that replays it:
#   WGDIFF_FUZZ_SEED=<seed> cargo test --release --test engine -- --ignored fuzz_long_<loader>
set -uo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
loaders=${2:-"idx cifar image_folder checkpoint compressed_checkpoint schedule_file toml_config data_strings diffusers"}
export WGDIFF_FUZZ_SECONDS=$((minutes * 60))
log=$(mktemp -d)
# Build once and run a copy of the test binary, so edits during a long run change nothing.
built=$(cargo test --release --test engine --no-run 2>&1 | sed -n 's/.*Executable.*(\(.*\)).*/\1/p' | tail -1)
[ -x "$built" ] || { echo "the engine test binary did not build"; exit 1; }
cp "$built" "$log/engine"
echo "fuzzing $loaders for $minutes min each; commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + changes'), $(date -u +'%Y-%m-%d %H:%M UTC')"
rm -f "${TMPDIR:-/tmp}"/wgdiff-fuzz-*.seed
run() {
  "$log/engine" --ignored --exact "fuzz::fuzz_long_$1" --nocapture >"$log/$1.out" 2>&1
  echo $? >"$log/$1.rc"
}
set -- $loaders
while [ $# -gt 0 ]; do
  run "$1" &
  [ $# -gt 1 ] && run "$2" &
  wait
  shift
  [ $# -gt 0 ] && shift
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
  fi
done
for f in "${TMPDIR:-/tmp}"/wgdiff-fuzz-*.seed; do
  [ -e "$f" ] && echo "  the case running when a fuzzer died: $(basename "$f" .seed), seed $(cat "$f")"
done
exit $failed
