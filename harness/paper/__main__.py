"""``python -m harness.paper model=<model> [model.path=...] [paper.<key>=...] [--dry-run | --status]``: the whole
paper for one model as one dependency graph (``conf/paper/paper.yaml``), run locally step by step or submitted to
SLURM at once (``paper.launcher=slurm paper.cluster=<conf/cluster/...>``). Overrides other than ``paper.*`` are
given to every job (``model=``, ``model.path=``, ``paths.results=``, ...); ``hydra.run.dir=<dir>`` puts each job's
logs in ``<dir>/<job key>/`` (:mod:`harness.paper.hydra_overrides`). Re-running resumes: finished jobs are skipped,
queued or running ones are not submitted again."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError, print_error, unknown_name


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m harness.paper", description=__doc__)
    p.add_argument("overrides", nargs="*", help="model=..., paths.results=..., paper.launcher=slurm, ...")
    p.add_argument("--dry-run", action="store_true", help="print the graph, what is done and the GPU-hours; run nothing")
    p.add_argument("--status", action="store_true", help="each step's state from the records and the SLURM queue")
    return p.parse_args(list(argv))


def cluster_profile(name: str) -> dict[str, Any]:
    from omegaconf import OmegaConf
    path = Path(str(resources.files("conf"))) / "cluster" / f"{name}.yaml"
    if not path.is_file():
        names = [p.stem for p in path.parent.glob("*.yaml")]
        raise unknown_name("cluster profile", name, names, "Add conf/cluster/<name>.yaml.")
    out = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    assert isinstance(out, dict)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        return run(args)
    except HarnessError as exc:
        return print_error(exc)


def run(args: argparse.Namespace) -> int:
    from harness.paper import cost, graph, hydra_overrides, job, progress, show, slurm, validate
    hydra = hydra_overrides.split(args.overrides, "python -m harness.paper",
                                  "paper.launcher=slurm paper.cluster=<conf/cluster profile>")
    overrides = hydra.rest
    mine = [o for o in overrides if o.startswith("paper.")]
    name = next((o.partition("=")[2] for o in overrides if o.startswith("paper=")), "paper")
    common = best_step([o for o in overrides if not o.startswith(("paper.", "paper="))])
    paper = graph.load_paper(name, mine)
    validate.check_paper(paper, validate.file_keys(name))
    cluster = cluster_profile(str(paper["cluster"]))
    steps = graph.build(paper, common)
    submitting = not (args.dry_run or args.status)
    validate.check_runs(steps, deep=submitting)   # before the records are planned: every job's names and keys
    queued = None
    if paper["launcher"] == "slurm" and submitting:
        queued = slurm.queue()   # before the records are read: a job ending in between is found in one or the other
    states = job.settle(steps, progress.job_states(steps), paper)   # 'done': selections and the site built from the records
    cost.host_memory(steps, states)    # each step's --mem, from its jobs' memory model
    model = next((s.model for s in states.values() if s.model), {})
    res = next((s.results for s in states.values() if s.results), "results")
    tp = cost.throughput(model, res)
    folder = Path(res).resolve().parent / "paper" / str(model.get("name"))
    if hydra.note("paper"):
        print(hydra.note("paper"), flush=True)
    if args.dry_run:
        head = (f"paper graph for {model.get('name')}: results folder {res}; launcher {paper['launcher']}; "
                f"cluster {paper['cluster']}")
        print("\n".join(show.dry_run(steps, states, tp, cluster, head)))
    elif args.status:
        print("\n".join(show.status(steps, states, tp, cluster, folder)))
    check_readable(states)             # after what --dry-run or --status print, before anything is written
    if not submitting:
        return 0
    validate.check_folder(folder)      # with check_runs: everything a single run checks, before any job exists
    folder.mkdir(parents=True, exist_ok=True)
    context = write_context(folder, {"paper": paper, "common": common, "log_dir": hydra.log_dir})
    if paper["launcher"] == "local":
        return job.run_local(steps, states, context)
    ids = slurm.submit(steps, states, context, cluster, folder, queued)
    for name, got in ids.items():
        if got:
            print(f"{name:20s} {', '.join(got)}")
    print(f"submitted; follow with: python -m harness.paper {' '.join(args.overrides)} --status")
    return 0


def write_context(folder: Path, context: dict[str, Any]) -> Path:
    """``context.json``, which every job reads when it starts: replaced whole (a re-submit while the graph's jobs
    start must never let one read it half-written)."""
    from harness.core.results import atomic_write_json

    atomic_write_json(folder / "context.json", context)
    return folder / "context.json"


def best_step(common: list[str]) -> list[str]:
    """``model.path=series:<name>``: that series' selected step, resolved here for every job."""
    from harness.selection.series import PREFIX, resolve
    if not any(o.partition("=")[0].lstrip("+") == "model.path" and o.partition("=")[2].startswith(PREFIX)
               for o in common):
        return common
    from harness.paper.progress import config_of
    plain = [o for o in common if not o.partition("=")[2].startswith(PREFIX)]
    return resolve(common, str(config_of(plain).paths.results))


def check_readable(states: Any) -> None:
    """Every record the graph's jobs were planned from could be read: a record file there that cannot be (truncated,
    not a record) leaves its cell's state unknown, so what was shown cannot be trusted and nothing is submitted."""
    bad = [(key, u) for key, s in states.items() for u in s.unreadable]
    if bad:
        (key, first), more = bad[0], f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise HarnessError(f"job {key}: the record {first} cannot be read{more}, so the graph's state cannot be "
                           "trusted: restore it from a copy, or remove it to compute that cell again")


if __name__ == "__main__":
    sys.exit(main())
