"""The GPU check's summary: python benchmarks/gpu/summary.py <OUT> [--dry-run].

Reads what the check wrote as it went (``figures.jsonl``: one figure per line, benchmarks/gpu/figures.py;
``steps.jsonl``: each step's exit code, seconds and time limit) and prints first what ran (torch and the libraries
from the set-up's versions figure: on the GPU machine the image's torch under the carried transformers), then, in
the issue's order, one line per figure: its verdict (PASS/FAIL against its target, INFO without one, DRY in a CPU
dry run, whose tiny shapes make the targets meaningless), the figure, and the GPU, torch and attention kernel it
was measured with (``... on bfloat16``: the dtype the kernel's inputs were in); then one line per step that did
not finish (its exit code, or the deadline that cut it) and MISSING for a step with no figure. Step logs are in
``logs.tar.gz``. Only the standard library: it runs wherever the check ran, from the check's exit trap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: the check's steps in the issue's order (benchmarks/gpu/check.sh runs them in this order)
STEPS = ("setup", "window", "efficiency", "bf16", "retrieval", "encode", "parity", "gradients", "task_efficiency",
         "task_beir")


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


def ran_with(figures: list[dict[str, Any]]) -> str:
    """What the figures were measured with: the set-up's versions (torch first, each library's origin: ``image``
    for the interpreter's own, ``carried`` for the wheels laid over it), else the torch the figures name."""
    versions = next((f for f in figures if f.get("step") == "setup" and f.get("name") == "versions"), None)
    if versions:
        return str(versions.get("value")) + (f" [{versions['note']}]" if versions.get("note") else "")
    torch = sorted({str(f.get("torch")) for f in figures if f.get("torch")})
    return (f"torch {', '.join(torch)}" if torch else "nothing measured") + "; versions unknown (the set-up wrote none)"


def summary(out: Path, dry: bool) -> list[str]:
    figures, steps = lines_of(out / "figures.jsonl"), {s["step"]: s for s in lines_of(out / "steps.jsonl")}
    rows = [("CPU dry run (tiny shapes: targets do not apply)" if dry else "GPU check") + f", {out}: {ran_with(figures)}"]
    for step in STEPS:
        mine = [f for f in figures if f.get("step") == step]
        for f in mine:
            rows.append(f"{verdict(f, dry):8s} {step}: {f['name']}: {shown(f)} [{f.get('gpu')}; torch "
                        f"{f.get('torch')}; kernel {f.get('kernel') or '-'}]")
        done = steps.get(step)
        if done is None:
            rows.append(f"{'MISSING':8s} {step}: not started (the check's deadline or an earlier exit)")
        elif done.get("rc") != 0:
            why = "time limit" if done.get("rc") in (124, 137) else f"exit code {done.get('rc')}"
            rows.append(f"{'STOPPED' if mine else 'MISSING':8s} {step}: {why} after {done.get('seconds')} s of its "
                        f"{done.get('limit')} s; last line of {step}.log: {done.get('last', '')}")
        elif not mine:
            rows.append(f"{'MISSING':8s} {step}: finished without a figure; see {step}.log in logs.tar.gz")
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
