"""Leaderboard: result records + the paper's published baselines -> Markdown, CSV and a static site.

``python -m harness.leaderboard results/ --out leaderboard/site --combine best``"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.leaderboard.build import Leaderboard, build_leaderboard
from harness.leaderboard.records import COMBINE_RULES
from harness.leaderboard.tables import write_csvs, write_markdown, write_site

__all__ = ["COMBINE_RULES", "Leaderboard", "build", "build_leaderboard"]


def build(dirs: Sequence[str | os.PathLike], out: str | os.PathLike, *, combine: str = "mean", published: bool = True,
          mteb_results: Sequence[str | os.PathLike] = (), mteb_models: Sequence[str] = (),
          significance: dict[str, Any] | None = None) -> tuple[Leaderboard, list[Path]]:
    """Build everything into ``out`` (the site, leaderboard.md, one CSV per table); the board and files."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lb = build_leaderboard(dirs, combine_rule=combine, published=published, link_root=out,
                           mteb_results=mteb_results, mteb_models=mteb_models)
    sig = None
    if significance is not None:
        from harness.leaderboard.significance import check_baseline, tests
        check_baseline(lb, significance.get("baseline"))
        sig = tests(lb.tables, out.resolve(), significance)
    files = [*write_site(lb, out, sig), write_markdown(lb, out), *write_csvs(lb, out)]
    return lb, files
