"""The GPU check's summary: python benchmarks/gpu/summary.py <OUT> [--dry-run].

Reads what the check wrote as it went (``figures.jsonl``: one figure per line, benchmarks/gpu/figures.py;
``steps.jsonl``: each step's exit code, seconds, time limit and what cut it, or why it did not start) and prints
first what ran (torch and the libraries from the set-up's versions figure: on the GPU machine the image's torch
under the carried transformers), then, step by step in the check's order, one line per figure: its verdict
(PASS/FAIL against its target, INFO without one, DRY in a CPU dry run, whose tiny shapes make the targets
meaningless), the figure, and the GPU, torch and attention kernel it was measured with (``... on bfloat16``: the
dtype the kernel's inputs were in); a MISSING line for each figure with a target (:data:`TARGETS`) that was not
written, with the reason; a line for each step that did not finish (CUT: its own limit or the check's deadline,
or not started and why; ERROR: its exit code); the last line counts them and names every step cut and why.
Step logs are in ``logs.tar.gz``. Only the standard library: it runs wherever the check ran, from its exit trap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: the check's steps in the order benchmarks/gpu/check.sh runs them: every step with a figure with a target first,
#: then the information only (one step: the padded loop, autocast, MiniLM's retrieval, the cold torch.compile last)
STEPS = ("setup", "window", "efficiency", "bf16", "encode", "parity", "gradients", "task_efficiency", "task_beir",
         "information")
#: every figure with a target: (step, the start of its name, written on a GPU only); tests/test_gpu_check.py checks
#: that a dry run writes each of them with its target and no other figure has one
TARGETS = (
    ("window", "window probe: cases where the kernel ran its own window", False),
    ("efficiency", "short_fixed fp32 weights", False),
    ("efficiency", "short_variable fp32 weights", False),
    ("efficiency", "short variable / short fixed", False),
    ("efficiency", "long_fixed fp32 weights", False),
    ("efficiency", "long_variable fp32 weights", False),
    ("efficiency", "long variable / long fixed", False),
    ("bf16", "short_fixed bf16 weights", False),
    ("encode", "harness encoder: GPU busy, kernel time only", False),
    ("encode", "harness / best sentence-transformers", False),
    ("parity", "packed vs padded sdpa", False),
    ("gradients", "fp32 gradients", False),
    ("gradients", "bf16 gradients", True),
    ("task_efficiency", "task records read", False),
    ("task_beir", "task records read", False),
)


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


def targets(dry: bool) -> list[tuple[str, str]]:
    """(step, name start) of every figure with a target that this kind of run writes."""
    return [(step, name) for step, name, gpu_only in TARGETS if not (dry and gpu_only)]


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


def status(step: str, done: dict[str, Any] | None) -> tuple[str, str] | None:
    """(verdict, why) for a step that did not finish (None: it did): CUT by a limit or never started, or ERROR."""
    if done is None:
        return "CUT", "not started: no record of it (the check stopped before it)"
    if done.get("started") == "no":
        return "CUT", f"not started: {done.get('why')}"
    rc, last = done.get("rc"), f"; last line of {step}.log: {done.get('last', '')}"
    if rc in (124, 137):
        return "CUT", (f"stopped by {done.get('cut') or 'a time limit'} after {done.get('seconds')} s (limit "
                       f"{done.get('limit')} s, its own {done.get('own_limit', done.get('limit'))} s){last}")
    if rc != 0:
        return "ERROR", f"exit code {rc} after {done.get('seconds')} s{last}"
    return None


def step_rows(step: str, figures: list[dict[str, Any]], done: dict[str, Any] | None, dry: bool) -> list[str]:
    mine = [f for f in figures if f.get("step") == step]
    rows = [f"{verdict(f, dry):8s} {step}: {f['name']}: {shown(f)} [{f.get('gpu')}; torch {f.get('torch')}; kernel "
            f"{f.get('kernel') or '-'}]" for f in mine]
    cut = status(step, done)
    why = cut[1].split(";")[0] if cut else "the step finished without it; see its log in logs.tar.gz"
    for s, name in targets(dry):
        if s == step and not any(f["name"].startswith(name) and f.get("target") for f in mine):
            rows.append(f"{'MISSING':8s} {step}: {name}...: not written ({why})")
    if cut:
        rows.append(f"{cut[0]:8s} {step}: {cut[1]}")
    elif not mine:
        rows.append(f"{'MISSING':8s} {step}: finished without a figure; see {step}.log in logs.tar.gz")
    return rows


def summary(out: Path, dry: bool) -> list[str]:
    figures, steps = lines_of(out / "figures.jsonl"), {s["step"]: s for s in lines_of(out / "steps.jsonl")}
    rows = [("CPU dry run (tiny shapes: targets do not apply)" if dry else "GPU check") + f", {out}: {ran_with(figures)}"]
    for step in STEPS:
        rows += step_rows(step, figures, steps.get(step), dry)
    verdicts = [r.split()[0] for r in rows[1:]]
    cut = [f"{step} ({why.split(';')[0]})" for step in STEPS if (s := status(step, steps.get(step)))
           for why in [s[1]]]
    rows.append(f"{verdicts.count('PASS')} PASS, {verdicts.count('FAIL')} FAIL, {verdicts.count('MISSING')} MISSING, "
                f"{verdicts.count('INFO')} INFO" + (f", {verdicts.count('DRY')} DRY" if dry else "")
                + (f"; steps not finished: {', '.join(cut)}" if cut else "; every step finished"))
    return rows


def main() -> None:
    out = Path(sys.argv[1])
    print("\n".join(summary(out, "--dry-run" in sys.argv[2:])))


if __name__ == "__main__":
    main()
