"""``task=efficiency``'s typed settings (conf/task/efficiency.yaml documents each key) and a synthetic set's
definition (Table 10), importable without torch: the planner types the config, the measurement reads them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError
from harness.core.typed import at_least, choices, count, excluded, nonempty, positive


@dataclass(kw_only=True)
class MaxBatchSettings:
    search: bool                      # find the largest batch that fits (one process per probe)
    limit: int = count()              # never probe above this (ModernBERT's script stopped at 4,096)
    resolution: int = count()         # stop bisecting when the bracket is this narrow
    #: budget per probe; null: the device's memory (CPU: 80% of MemAvailable)
    memory_gb: float | None = positive(null="the device's memory")
    #: CPU: time budget of a probe's forward (default in conf/task/efficiency.yaml)
    probe_seconds: float | None = positive(null="no time budget")


@dataclass(kw_only=True)
class EfficiencySettings:
    name: str
    datasets: list[str] = nonempty("sets", excluded="which sets to measure: each one is its own cell of the same run")
    sets: dict[str, Any] = excluded("each cell's own set definition is part of its data spec")
    n_docs: int = count()
    repeats: int = count()
    warmup: int = at_least(0)
    seed: int
    token_low: int = at_least(0)
    token_high: int = count()
    unpad: str = choices("auto", "on", "off")
    pad_to: str = choices("set_max", "longest")
    max_batch: MaxBatchSettings
    #: CPU: time budget of a set's passes (default in conf/task/efficiency.yaml)
    set_seconds: float | None = positive(null="no time budget")
    roofline: bool
    roofline_size: int = count()
    precision: str | None = choices(None, "auto", "fp32", "bf16", "fp16")


@dataclass(kw_only=True)
class SetSpec:
    """One synthetic set (Table 10): every document ``length`` tokens, or normal(``mean``, ``std``) lengths as
    ``torch.normal(...).int().clamp(min, max)`` after ``torch.manual_seed(seed)`` (Table 10's statistics exactly)."""

    length: int | None = None
    mean: float | None = None
    std: float | None = None
    min: int | None = None
    max: int | None = None
    batch_size: int

    def __post_init__(self) -> None:
        fixed = self.length is not None
        drawn = None not in (self.mean, self.std, self.min, self.max)
        if fixed == drawn or self.batch_size < 1:
            raise HarnessError("a synthetic set needs either length=<tokens> or mean, std, min and max "
                               "(and batch_size >= 1), e.g. {mean: 256, std: 64, min: 32, max: 512, batch_size: 512}")

    @property
    def max_length(self) -> int:
        return int(self.length if self.length is not None else self.max)  # type: ignore[arg-type]
