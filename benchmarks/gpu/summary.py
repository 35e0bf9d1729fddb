"""The GPU check's summary: python benchmarks/gpu/summary.py <OUT> [--dry-run].

Reads what the check wrote as it went (``figures.jsonl``: one figure per line, benchmarks/gpu/figures.py;
``steps.jsonl``: each step's exit code, seconds and time limit) and prints, in the issue's order, one line per
figure: its verdict (PASS/FAIL against its target, INFO without one, DRY in a CPU dry run, whose tiny shapes make
the targets meaningless), the figure, and the GPU, torch and attention kernel it was measured with; then one line
per step that did not finish (its exit code, or the deadline that cut it) and MISSING for a step with no figure.
Only the standard library: it runs wherever the check ran, from the check's exit trap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: the check's steps in the issue's order (benchmarks/gpu/check.sh runs them in this order)
STEPS = ("window", "efficiency", "bf16", "retrieval", "parity", "gradients", "records")


def lines_of(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:          # a line cut off by a killed step
            continue
    return out


def verdict(figure: dict[str, Any], dry: bool) -> str:
    target, value = figure.get("target"), figure.get("value")
    if not target or not isinstance(value, int | float):
        return "INFO"
    if dry:
        return "DRY"
    op, bound = target
    return "PASS" if (value >= bound if op == ">=" else value <= bound) else "FAIL"


def shown(figure: dict[str, Any]) -> str:
    value, target = figure.get("value"), figure.get("target")
    text = f"{value:,.6g}" if isinstance(value, int | float) else str(value)
    text += f" {figure.get('unit') or ''}".rstrip()
    if target:
        text += f" (needs {target[0]} {target[1]:,.6g})"
    if figure.get("note"):
        text += f"; {figure['note']}"
    return text


def summary(out: Path, dry: bool) -> list[str]:
    figures, steps = lines_of(out / "figures.jsonl"), {s["step"]: s for s in lines_of(out / "steps.jsonl")}
    rows = [("CPU dry run (tiny shapes: targets do not apply)" if dry else "GPU check") + f", {out}"]
    for step in STEPS:
        mine = [f for f in figures if f.get("step") == step]
        for f in mine:
            rows.append(f"{verdict(f, dry):8s} {step}: {f['name']}: {shown(f)} [{f.get('gpu')}; torch "
                        f"{f.get('torch')}; kernel {f.get('kernel') or '-'}]")
        ran = steps.get(step)
        if ran is None:
            rows.append(f"{'MISSING':8s} {step}: not started (the check's deadline or an earlier exit)")
        elif ran.get("rc") != 0:
            why = "time limit" if ran.get("rc") in (124, 137) else f"exit code {ran.get('rc')}"
            rows.append(f"{'STOPPED' if mine else 'MISSING':8s} {step}: {why} after {ran.get('seconds')} s of its "
                        f"{ran.get('limit')} s; last line of {step}.log: {ran.get('last', '')}")
        elif not mine:
            rows.append(f"{'MISSING':8s} {step}: finished without a figure; see {step}.log")
    verdicts = [r.split()[0] for r in rows[1:]]
    rows.append(f"{verdicts.count('PASS')} PASS, {verdicts.count('FAIL')} FAIL, "
                f"{verdicts.count('MISSING') + verdicts.count('STOPPED')} MISSING/STOPPED, {verdicts.count('INFO')} INFO"
                + (f", {verdicts.count('DRY')} DRY" if dry else ""))
    return rows


def main() -> None:
    out = Path(sys.argv[1])
    print("\n".join(summary(out, "--dry-run" in sys.argv[2:])))


if __name__ == "__main__":
    main()
