"""Each figure of the GPU check, written the moment it exists: one JSON line appended to ``$OUT/figures.jsonl``
(flushed and synced, so a step cut off by its time limit, or a machine taken back, keeps what it measured), with
the device, torch's version and the attention kernel counted while it was measured; and one printed line.

Only the standard library and torch: it runs wherever a check step runs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    try:
        with open("/proc/cpuinfo") as fh:
            return next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")) + " (CPU)"
    except (OSError, StopIteration):
        return "CPU"


def marks(*encoders: Any) -> list[Any]:
    """Where each encoder's attention counts stand now (:func:`kernel_of`'s ``since``): a run's own calls."""
    from harness.models.kernel_calls import watch

    return [watch(e).mark() for e in encoders]


def kernel_of(*encoders: Any, since: list[Any] | None = None) -> str:
    """The attention kernels counted on ``encoders`` (transformers models; :mod:`harness.models.kernel_calls`)
    since ``since`` (:func:`marks`; None: since they were first watched), each with the dtype its inputs were in
    (``... on bfloat16``: fp32 weights cast around the flash kernel), joined with `` | ``."""
    from harness.models.kernel_calls import observed_kernel, watch

    parts = []
    for i, encoder in enumerate(encoders):
        calls, dtypes = watch(encoder).since(since[i] if since else None)
        kernel, dtype = observed_kernel(calls) or "none counted", observed_kernel(dtypes)
        parts.append(f"{kernel} on {dtype}" if dtype else kernel)
    return " | ".join(parts)


class Figures:
    """Appends figures of ``step`` to ``out``/figures.jsonl (None: print only)."""

    def __init__(self, out: str | Path | None, step: str, device: str) -> None:
        self.path = Path(out) / "figures.jsonl" if out else None
        self.step, self.device = step, device
        self.gpu = device_name(device)
        self.torch = torch.__version__ + (f" CUDA {torch.version.cuda}" if device.startswith("cuda") else "")

    def add(self, name: str, value: float | str | None, unit: str = "", *, kernel: str = "",
            target: tuple[str, float] | None = None, note: str = "") -> None:
        """One figure; ``target`` (``(">=", x)`` or ``("<=", x)``) makes it a PASS/FAIL line in the summary."""
        line = {"step": self.step, "name": name, "value": value, "unit": unit, "target": list(target) if target
                else None, "kernel": kernel, "gpu": self.gpu, "torch": self.torch, "note": note,
                "time": time.strftime("%Y-%m-%d %H:%M:%S")}
        shown = f"{value:,.6g}" if isinstance(value, int | float) else str(value)
        print(f"[{self.step}] {name}: {shown} {unit}".rstrip() + (f" (target {target[0]} {target[1]:,.6g})"
                                                                  if target else "") + (f"; {note}" if note else ""),
              flush=True)
        if self.path is None:
            return
        with open(self.path, "a") as fh:
            fh.write(json.dumps(line) + "\n")
            fh.flush()
            os.fsync(fh.fileno())



def earlier(out: str | Path | None, step: str, name_start: str) -> dict[str, Any] | None:
    """The last figure of ``step`` whose name starts with ``name_start`` already in ``out``'s figures.jsonl (None:
    none written, or no ``out``): what a later step compares with an earlier step's figure."""
    if not out or not (Path(out) / "figures.jsonl").is_file():
        return None
    found = None
    for line in (Path(out) / "figures.jsonl").read_text().splitlines():
        try:
            figure = json.loads(line)
        except ValueError:                  # a line cut off by a killed step
            continue
        if figure.get("step") == step and str(figure.get("name", "")).startswith(name_start):
            found = figure
    return found


def written(out: str | Path | None, step: str, name_start: str) -> float | None:
    """The value of :func:`earlier`'s figure where it is a number, else None."""
    value = (earlier(out, step, name_start) or {}).get("value")
    return float(value) if isinstance(value, int | float) else None
