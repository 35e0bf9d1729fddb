"""What a job processes, for the paper graph's cost preview: tokens trained on and evaluated (each runner's estimate),
and the cost file's published sizes a runner falls back on where its data is not local. Reads YAML only."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

LONG = 512    # documents past this many tokens use the long-document throughput


@dataclass
class Work:
    """Tokens a job processes: training tokens (forward + backward), short and long evaluation tokens."""

    train: float = 0.0
    short: float = 0.0
    long: float = 0.0
    fixed_s: float = 0.0            # seconds whatever the data: process start, imports, model load
    local: int = 0                  # datasets or files sized from the configured local data
    published: int = 0              # datasets sized from the cost file (hub copies)
    host: dict[str, float] = field(default_factory=dict)   # host GB each dataset's evaluation needs (SLURM --mem)

    def __iadd__(self, other: Work) -> Work:
        self.train, self.short, self.long = self.train + other.train, self.short + other.short, self.long + other.long
        self.fixed_s += other.fixed_s
        self.local, self.published = self.local + other.local, self.published + other.published
        self.host = {d: max(gb, self.host.get(d, 0.0)) for d, gb in {**self.host, **other.host}.items()}
        return self

    @property
    def host_gb(self) -> float:
        """The most host memory any of its datasets needs (0: none modelled)."""
        return max(self.host.values(), default=0.0)

    def add_tokens(self, tokens: float, length: float) -> None:
        """Evaluation ``tokens`` of texts ``length`` tokens long: short or long by :data:`LONG`."""
        if length > LONG:
            self.long += tokens
        else:
            self.short += tokens


@cache
def cost_data() -> dict[str, Any]:
    """``conf/paper/cost.yaml``: the cost model's constants and the published sizes of hub datasets."""
    from omegaconf import OmegaConf
    out = OmegaConf.to_container(OmegaConf.load(Path(str(resources.files("conf"))) / "paper" / "cost.yaml"))
    assert isinstance(out, dict)
    return out
