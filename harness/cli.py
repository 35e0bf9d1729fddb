"""`python -m harness task=<task> model=<model> ...`: compose the config, run its task family through the runner."""

from __future__ import annotations

import logging
import sys
from importlib import resources

import hydra
from omegaconf import DictConfig

from harness.errors import HarnessError, unknown_name

log = logging.getLogger("harness")

#: Config groups whose option names we check before Hydra does, to suggest the closest valid name.
CHECKED_GROUPS = ("task", "model", "sweep")


def group_options(group: str) -> list[str]:
    """Names of the YAML files in ``conf/<group>/``."""
    root = resources.files("conf") / group
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


def check_group_overrides(argv: list[str]) -> None:
    """Fail on ``task=nope`` with the valid names, closest first (Hydra lists them alphabetically)."""
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        if not sep or key not in CHECKED_GROUPS or value in ("", "null"):
            continue
        options = group_options(key)
        for v in value.split(","):  # multirun: task=a,b
            if v not in options:
                how = f"Add conf/{key}/{v}.yaml to define a new one."
                if key == "model":
                    how += " Any hub id or local directory also works: model.path=<id or dir>."
                raise unknown_name(key, v, options, how)


def run(cfg: DictConfig):
    """Run the composed config (also the entry point for tests): the task family's cells, through the one loop."""
    from harness import runner

    return runner.run(cfg)


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    try:
        records = run(cfg)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        if _is_multirun():  # one bad job must not stop its siblings in a sweep; keep it in the job's log
            log.error("%s", exc)
            return None
        sys.exit(2)
    scores = [r.score for r in records or [] if r.status == "ok" and r.score is not None]
    return sum(scores) / len(scores) if scores else None


def sweep_name() -> str | None:
    """The ``sweep=`` config this run was composed with, if any (None outside the CLI, e.g. in tests)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return HydraConfig.get().runtime.choices.get("sweep")
    except ValueError:
        return None


def _is_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig

    try:
        return str(HydraConfig.get().mode) == "RunMode.MULTIRUN"
    except ValueError:
        return False


#: ``harness <subcommand>`` (the console script) -> the module whose ``main(argv)`` runs it
SUBCOMMANDS = {"leaderboard": "harness.leaderboard.__main__", "select": "harness.select"}


def main() -> None:
    if sys.argv[1:2] and sys.argv[1] in SUBCOMMANDS:
        import importlib

        sys.exit(importlib.import_module(SUBCOMMANDS[sys.argv[1]]).main(sys.argv[2:]))
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] %(message)s")
    try:
        check_group_overrides(sys.argv[1:])
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    _hydra_main()


if __name__ == "__main__":
    main()
