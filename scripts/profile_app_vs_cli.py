#!/usr/bin/env python3
"""The app's profile view against `wgdiff profile` on the same workload, in alternating rounds.

Each round runs `wgdiff profile unet --preset P --batch B --steps 1` and then the app's profile
view on the same preset and batch (`wgdiff gui --view profile --autorun --exit-when-done`, which
announces its profile as JSON on stderr). Prints, per round and as medians over the rounds: the
wall time, the op times' share of it, and for the longest ops with counted FLOPs each one's
GFLOP/s in both and their ratio; and whether any op of the app's profile is above its measured roof.

Usage (a display is needed for the app: Xvfb on a machine without one):
  DISPLAY=:97 python3 scripts/profile_app_vs_cli.py [--rounds 3] [--preset mnist-small] [--batch 16]
"""
import argparse
import json
import statistics
import subprocess
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--preset", default="mnist-small")
parser.add_argument("--batch", type=int, default=16)
parser.add_argument("--wgdiff", default="target/release/wgdiff")
parser.add_argument("--top", type=int, default=8, help="ops with counted FLOPs compared (longest first)")
args = parser.parse_args()
if args.preset != "mnist-small" or args.batch != 16:
    sys.exit("the app's profile view starts at mnist-small, batch 16: compare that workload")


def cli_round():
    """The CLI's op rows {(op, kernel): (calls, ms, GFLOP/s)} and (wall ms, op ms)."""
    out = subprocess.run(
        [args.wgdiff, "profile", "unet", "--preset", args.preset, "--batch", str(args.batch), "--steps", "1", "--json"],
        capture_output=True, text=True, check=True)
    rows = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            rows[(r["op"], r["kernel"])] = (r["calls"], r["total_ms"], r.get("gflops"))
    wall = next(float(l.split("wall ")[1].split(" ms")[0]) for l in out.stderr.splitlines() if l.startswith("step 1:"))
    return rows, (wall, sum(ms for _, ms, _ in rows.values())), None


def app_round():
    """The app's op rows, (wall ms, op ms) and its measured roof (GFLOP/s)."""
    out = subprocess.run(
        [args.wgdiff, "gui", "--view", "profile", "--autorun", "--exit-when-done", "--out", "/tmp/wgdiff-profile-app"],
        capture_output=True, text=True, check=True)
    line = next(l for l in out.stderr.splitlines() if l.startswith("profile: "))
    done = json.loads(line[len("profile: "):])
    rows = {(r["op"], r["kernel"]): (r["calls"], r["total_ms"], r.get("gflops")) for r in done["rows"]}
    return rows, (done["wall_ms"], done["op_ms"]), done["roof_gflops"]


rounds = {"cli": [], "app": []}
for i in range(args.rounds):
    for name, run in (("cli", cli_round), ("app", app_round)):
        rows, (wall, op_ms), roof = run()
        rounds[name].append((rows, wall, op_ms, roof))
        print(f"round {i + 1} {name}: wall {wall:.0f} ms, op times {op_ms:.0f} ms ({100 * op_ms / wall:.0f}% of wall)"
              + (f", roof {roof:.1f} GFLOP/s" if roof else ""), flush=True)

med = statistics.median
for name in ("cli", "app"):
    walls = [w for _, w, _, _ in rounds[name]]
    shares = [o / w for _, w, o, _ in rounds[name]]
    print(f"{name}: median wall {med(walls):.0f} ms, op times {100 * med(shares):.0f}% of wall")
calls_equal = all(
    {k: v[0] for k, v in a[0].items()} == {k: v[0] for k, v in c[0].items()}
    for a, c in zip(rounds["app"], rounds["cli"]))
print(f"same ops and calls in every round: {calls_equal}")
first_cli = rounds["cli"][0][0]
# the ops with counted FLOPs, longest first
top = sorted((k for k in first_cli if first_cli[k][2]), key=lambda k: -first_cli[k][1])[: args.top]
print(f"{'op':22} {'kernel':42} {'CLI GFLOP/s':>11} {'app GFLOP/s':>11} {'app/CLI':>8}")
worst = 0.0
for key in top:
    cli = [r[0][key][2] for r in rounds["cli"] if r[0].get(key) and r[0][key][2]]
    app = [r[0][key][2] for r in rounds["app"] if r[0].get(key) and r[0][key][2]]
    if not cli or not app:
        continue
    ratio = med(app) / med(cli)
    worst = max(worst, abs(1 - ratio))
    print(f"{key[0]:22} {key[1][:42]:42} {med(cli):11.2f} {med(app):11.2f} {ratio:8.2f}")
roofs = [r for _, _, _, r in rounds["app"]]
above = [k for rows, _, _, roof in rounds["app"] for k, v in rows.items() if v[2] and v[2] > roof]
print(f"largest GFLOP/s deviation among those ops: {100 * worst:.0f}%; app ops above the roof "
      f"(median {med(roofs):.1f} GFLOP/s): {len(above)}")
