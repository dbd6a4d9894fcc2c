"""The tables of scripts/gpu-bench.sh: reads OUT/rows.jsonl (every bench's --json rows, tagged
with the step that ran them, and the peak-RSS rows), OUT/steps.jsonl (each step's status and
command) and OUT/about.txt, writes OUT/gpu-bench.json and OUT/gpu-bench.md and prints the
Markdown.

    python3 scripts/gpu_bench_table.py OUT SECONDS
"""

import json
import pathlib
import sys
import time


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def cell(value, digits=1):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value).replace("|", "/")


def ratio(num, den):
    return num / den if num is not None and den else None


def goals(rows):
    """Issue 69's figures: (what, measured, goal) where the rows hold them."""
    out = []
    find = lambda **keys: [r for r in rows if all(r.get(k) == v for k, v in keys.items())]
    fma = next((r["gflops"] for r in find(step="mac", variant="fma-f32")), None)
    for r in find(step="matmul", variant="blocked"):
        out.append((f"matmul {r['shape']}: GFLOP/s over the adapter's fma-f32 rate", ratio(r["gflops"], fma), ">= 0.5 (on a GPU)"))
        if r.get("vs_torch") is not None:
            out.append((f"matmul {r['shape']}: vs PyTorch", r["vs_torch"], ">= 0.5"))
    for r in find(step="conv"):
        if r.get("vs_torch") is not None:
            out.append((f"conv {r['shape']} {r.get('pass')}: vs PyTorch", r["vs_torch"], ">= 0.4"))
    for r in find(step="train"):
        if r.get("vs_torch") is not None:
            out.append((f"`mnist` {r['variant']} {r['shape']}: vs PyTorch", r["vs_torch"], ">= 0.5"))
    ours = {r["shape"]: r["median_ms"] for r in find(step="step", variant="wgdiff")}
    for r in find(step="step", variant="diffusers"):
        out.append((f"sampling step {r['shape']}: vs diffusers (ratio of medians)", ratio(r["median_ms"], ours.get(r["shape"])), ">= 0.5"))
    int8 = {r["shape"]: r["median_ms"] for r in find(step="int8-step", variant="wgdiff")}
    for shape, ms in int8.items():
        out.append((f"int8 sampling step {shape}: speed over f32's", ratio(ours.get(shape), ms), ">= 1.0"))
    peaks = find(step="sample-peak")
    if len(peaks) == 2:
        out.append(("int8 `sample` peak RSS over f32's", ratio(peaks[1]["peak_rss_mib"], peaks[0]["peak_rss_mib"]), "<= 0.75"))
    return out


def markdown(about, rows, steps, seconds):
    lines = [f"# scripts/gpu-bench.sh, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {seconds} s", ""]
    lines += [f"- {line}" for line in about]
    lines += ["", "## Issue 69's figures", "", "| figure | measured | goal |", "|---|---:|---|"]
    lines += [f"| {what} | {cell(value, 2)} | {goal} |" for what, value, goal in goals(rows)]
    lines += ["", "## Every row (medians)", ""]
    lines += ["| step | shape | pass | variant | ms | GFLOP/s | vs torch | device |", "|---|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        if r.get("bench") == "peak":
            continue
        lines.append(
            f"| {r['step']} | {cell(r.get('shape'))} | {cell(r.get('pass'))} | {cell(r.get('variant'))} | "
            f"{cell(r.get('median_ms'), 3)} | {cell(r.get('gflops'))} | {cell(r.get('vs_torch'), 2)} | {cell(r.get('device'))} |"
        )
    peaks = [r for r in rows if r.get("bench") == "peak"]
    if peaks:
        lines += ["", "| `wgdiff sample` of the step's model, 1 image, 2 DDIM steps | wall s | peak RSS MiB |", "|---|---:|---:|"]
        lines += [f"| {r['variant']} | {r['wall_s']:.2f} | {r['peak_rss_mib']:.0f} |" for r in peaks]
    lines += ["", "## Steps", "", "| step | status | s | command |", "|---|---|---:|---|"]
    lines += [f"| {s['name']} | {s['status']} | {s['seconds']} | `{cell(s.get('command', ''))}` |" for s in steps]
    return "\n".join(lines) + "\n"


def main():
    out, seconds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    rows = read_jsonl(out / "rows.jsonl")
    steps = read_jsonl(out / "steps.jsonl")
    about_path = out / "about.txt"
    about = [line for line in about_path.read_text().splitlines() if line] if about_path.exists() else []
    table = markdown(about, rows, steps, seconds)
    (out / "gpu-bench.md").write_text(table)
    figures = [{"figure": what, "measured": value, "goal": goal} for what, value, goal in goals(rows)]
    doc = {"about": about, "seconds": seconds, "figures": figures, "steps": steps, "rows": rows}
    (out / "gpu-bench.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(table, end="")


if __name__ == "__main__":
    main()
