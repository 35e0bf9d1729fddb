"""``python -m harness.trial [local|slurm] [--dir trial] [paper overrides...]``: the shrunk paper graph
(``tests/fixtures/paper-tiny.yaml``: every step of the paper, a few jobs each) on the tiny ModernBERT in
``tests/fixtures`` and toy data it writes under ``<dir>/data``, run on this machine or submitted to SLURM
(``paper.cluster=local``: the one-node cluster of ``slurm/local-cluster.sh``). Needs a source checkout."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GRAPH = REPO / "tests" / "fixtures" / "paper-tiny.yaml"
MODEL = REPO / "tests" / "fixtures" / "tiny-modernbert"


def paper_args(folder: Path, launcher: str, extra: Sequence[str]) -> list[str]:
    """The ``python -m harness.paper`` arguments of the trial."""
    return [f"paper={GRAPH}", f"paper.data={folder / 'data'}", "model=modernbert-base", f"model.path={MODEL}",
            "model.name=tiny-modernbert", "model.max_length=128", "precision=fp32", "device=cpu",
            f"paths.results={folder / 'results'}", f"paths.outputs={folder / 'outputs'}",
            f"paths.cache={folder / 'cache'}", f"paper.launcher={launcher}", "paper.cluster=local", *extra]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.trial", description=__doc__.split("\n")[0])
    p.add_argument("launcher", nargs="?", default="local", choices=("local", "slurm"))
    p.add_argument("--dir", default="trial", help="where the toy data, results and site go (default: trial/)")
    p.add_argument("extra", nargs="*", help="more python -m harness.paper overrides, or --dry-run / --status")
    args, more = p.parse_known_args(argv)        # --dry-run, --status: python -m harness.paper's own flags
    args.extra = [*args.extra, *more]
    if not GRAPH.is_file() or not MODEL.is_dir():
        print(f"error: the trial needs a source checkout ({GRAPH} and {MODEL} not found): git clone the repository",
              file=sys.stderr)
        return 2
    folder = Path(args.dir).resolve()
    if not (folder / "data").is_dir():
        from harness.trial.toy_data import write_paper_data
        write_paper_data(folder / "data")
        print(f"toy data written to {folder / 'data'}", flush=True)
    cmd = [sys.executable, "-m", "harness.paper", *paper_args(folder, args.launcher, args.extra)]
    print("$ python " + " ".join(cmd[1:]), flush=True)
    code = subprocess.run(cmd, check=False).returncode
    if code == 0 and not {"--dry-run", "--status"} & set(args.extra):
        status = " ".join(["python -m harness.trial", args.launcher, f"--dir {args.dir}", "--status"])
        print(f"results: {folder / 'results'}; site: {folder / 'site' / 'index.html'}\nstatus: {status}")
    return code


if __name__ == "__main__":
    sys.exit(main())
