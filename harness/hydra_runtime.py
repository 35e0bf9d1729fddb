"""What a run knows of the Hydra job that launched it (nothing outside the CLI, e.g. in tests)."""

from __future__ import annotations


def sweep_name() -> str | None:
    """The ``sweep=`` config this run was composed with, if any (None outside the CLI, e.g. in tests)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return HydraConfig.get().runtime.choices.get("sweep")
    except ValueError:
        return None


def is_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig

    try:
        return str(HydraConfig.get().mode) == "RunMode.MULTIRUN"
    except ValueError:
        return False
