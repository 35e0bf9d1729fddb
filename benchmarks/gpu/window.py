"""The window probe: ModernBERT's local attention through the real kernel against the plain-torch reference, with
the window w and w +- 1, so a window that is off by one shows as a number instead of a slightly different nDCG.

One packed row of sequences of ``lengths`` tokens (1, 65, 129, 300 and 8,192 on a GPU) goes through
:func:`harness.models.varlen_attention.attention_forward` as a local layer calls it (``sliding_window`` = w + 1,
transformers' convention): on CUDA the flash kernel, counted. The same bf16 inputs, in fp32, go through
:func:`~harness.models.varlen_attention.reference` on the CPU with the window w - 1, w and w + 1. Per
(window, length): max |diff| of the kernel's output against each reference. The kernel agrees with the window it
was given when its difference from reference(w) is small and each neighbour's, where the window matters (a
sequence longer than w + 1), is clearly larger. Queries are small (attention close to uniform over the window),
so one key more or less moves each output by about 1 / (2w + 1) of a value: far above bf16's rounding.
"""

from __future__ import annotations

import types
from itertools import pairwise
from typing import Any

import torch

#: max |diff| of the kernel (bf16) against the fp32 reference at its own window that passes
TOLERANCE = 1e-2
#: a neighbour window's difference must be at least this many times the own window's, where the window matters
SEPARATION = 4.0


def probe(device: str, lengths: list[int], half_window: int, heads: int = 4, dim: int = 64,
          seed: int = 0) -> tuple[list[dict[str, Any]], str]:
    """One row per (window, length): ``{"window", "length", "diff": {w-1, w, w+1: max |diff|}, "matters": the
    neighbours whose reference differs from w's at this length}``, and the kernel counted."""
    from harness.models import varlen_attention as va
    from harness.models.kernel_calls import KernelCalls, observed_kernel

    g = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q = (0.1 * torch.randn(total, heads, dim, generator=g)).to(torch.bfloat16)
    k, v = (torch.randn(total, heads, dim, generator=g).to(torch.bfloat16) for _ in range(2))
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    module = types.SimpleNamespace(is_causal=False, _harness_calls=KernelCalls())
    refs = {w: va.reference(q.float(), k.float(), v.float(), cu, scale=dim ** -0.5, window=w)
            for w in range(half_window - 2, half_window + 3)}
    rows = []
    for w in (half_window - 1, half_window, half_window + 1):
        qd, kd, vd = (t.to(device)[None].transpose(1, 2) for t in (q, k, v))      # [1, heads, tokens, dim]
        out, _ = va.attention_forward(module, qd, kd, vd, None, scaling=dim ** -0.5, sliding_window=w + 1,
                                      cu_seq_lens_q=cu.to(device), max_length_q=max(lengths))
        got = out[0].float().cpu()                                                   # [tokens, heads, dim]
        for n, (a, b) in zip(lengths, pairwise(cu.tolist()), strict=True):
            diffs = {r: float((got[a:b] - refs[r][a:b]).abs().max()) for r in (w - 1, w, w + 1)}
            rows.append({"window": w, "length": n, "diff": diffs,
                         "matters": [r for r in diffs if r != w and n > max(r, w)]})   # ref(r) differs from ref(w)
    return rows, observed_kernel(module._harness_calls.snapshot()) or "none counted"


def verdict(row: dict[str, Any]) -> tuple[bool, str]:
    """Whether the kernel ran the window it was given, and the numbers that say so."""
    w, diffs = row["window"], row["diff"]
    own = diffs[w]
    ok = own <= TOLERANCE and all(diffs[r] >= SEPARATION * max(own, 1e-6) for r in row["matters"])
    shown = ", ".join(f"ref({r}) {d:.2e}" for r, d in sorted(diffs.items()))
    return ok, shown


def run(args: Any) -> None:
    from gpu.figures import Figures

    figures = Figures(args.out, "window", args.device)
    lengths = [1, 65, 129, 300, 8192] if args.shrink == 1 else [1, 9, 17, 30, 512]
    half = 64 if args.shrink == 1 else 8                      # ModernBERT-base: local_attention 128
    rows, kernel = probe(args.device, lengths, half)
    for row in rows:
        ok, shown = verdict(row)
        w = row["window"]
        figures.add(f"window: kernel at w={w} (sliding_window {w + 1} from the layer), length {row['length']}, "
                    f"max |diff| vs the reference at {w - 1}, {w}, {w + 1}", "ok" if ok else "WRONG WINDOW", "",
                    kernel=kernel,
                    note=shown + ("" if row["matters"] else "; no window of these differs at this length"))
    figures.add("window probe: cases where the kernel ran its own window", sum(verdict(r)[0] for r in rows),
                f"of {len(rows)}", kernel=kernel, target=(">=", len(rows)))
