"""The hand-off to the next stage: the best step that ``python -m harness.select --series NAME --task T`` wrote to
``selected/series-NAME.json``, as the overrides that evaluate it (``model.path=<its folder> model.name=<its row>``),
after checking that the folder still holds the weights that were selected."""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import HarnessError
from harness.layout import selection_dir
from harness.selection.series import selection_file

#: ``model.path=series:<name>`` (python -m harness.paper): the best step of that series
PREFIX = "series:"


def best_overrides(results_dir: str | Path, name: str) -> list[str]:
    """``model.path=... model.name=...`` of series ``name``'s selected step (selected/ beside ``results_dir``)."""
    from harness.models.weights import fingerprint

    path = selection_file(selection_dir(results_dir), name)
    select = f"python -m harness.select --series {name} --task <validation task> --results {results_dir}"
    try:
        best = json.loads(path.read_text())["best"]
        folder, fp, row = Path(best["folder"]), best["fingerprint"], best["model_name"]
    except FileNotFoundError:
        raise HarnessError(f"series {name!r} has no selected step ({path} does not exist): choose it first with "
                           f"{select}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{path} is not a series selection ({exc}): write it again with {select}") from None
    if not folder.is_dir():
        raise HarnessError(f"the selected step of series {name!r} ({folder}) is gone: restore the checkpoint, or "
                           f"select again among those left ({select})")
    if fingerprint(folder) != fp:
        raise HarnessError(f"the selected step of series {name!r} ({folder}) was rewritten since it was selected "
                           f"(fingerprint {fingerprint(folder)}, selected {fp}): evaluate the series again, then "
                           f"{select}")
    return [f"model.path={folder}", f"model.name={row}"]


def resolve(overrides: list[str], results_dir: str | Path) -> list[str]:
    """``overrides`` with ``model.path=series:<name>`` replaced by that series' selected step (and its row name)."""
    out = []
    for text in overrides:
        key, _, value = text.partition("=")
        if key.lstrip("+") == "model.path" and value.startswith(PREFIX):
            out += best_overrides(results_dir, value[len(PREFIX):])
        else:
            out.append(text)
    named = [o for o in out if o.partition("=")[0].lstrip("+") == "model.name"]
    return [o for o in out if o not in named[:-1]]   # the step's row name wins over a model.name given before it
