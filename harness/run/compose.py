"""The one way the harness composes a config outside a running Hydra app: what ``python -m harness <overrides>``
would run (conf/config.yaml through Hydra's compose API). The CLI's up-front checks, the paper planner and its
pre-submit validation use it. (Task specs and catalogs are read from their YAML files as data, without Hydra, so
the torch-free leaderboard and a running Hydra job can read them.)"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the package holding conf/config.yaml
CONFIG_MODULE = "conf"


def compose_config(overrides: Sequence[str] = (), *, config_dir: str | Path | None = None) -> Any:
    """The composed config for ``overrides``; ``config_dir``: a user's config folder searched after ``conf/``
    (``--config-dir``). Clears Hydra's global state first: never call it inside a running Hydra app."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    extra = [f"hydra.searchpath=[file://{Path(config_dir).resolve()}]"] if config_dir else []
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name="config", overrides=[*extra, *overrides])
