"""docs/fidelity.md's "Protocol fidelity" table cannot drift from the configs: each row's default equals what
``python -m harness <its command> --cfg job`` composes (Hydra's compose API, the CLI's composition), and each
constant's YAML line cites a source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import compose

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Protocol fidelity"
COLUMNS = ["constant (command, key)", "the paper says", "the authors' code did", "this harness's default", "source"]
#: one line of a constant's YAML comment names its source like this (repo@commit:path, an issue, the paper)
CITATION = re.compile(r"MB@[0-9a-f]{7}:|issue #\d+|appendix E\.\d|Table \d+")
#: how a row says the sources are silent and the default is the harness's choice
OUR_READING = "**our reading**"


def table_rows() -> list[list[str]]:
    text = (REPO / "docs" / "fidelity.md").read_text(encoding="utf-8")
    assert text.count(SECTION) == 1, f"docs/fidelity.md needs exactly one {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == COLUMNS
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[2:]]
    assert rows and all(len(r) == len(COLUMNS) for r in rows)
    return rows


def parse(row: list[str]) -> tuple[list[str], str, object]:
    """(overrides, key, default) of one row: the constant cell is `<command>` `<key>`, the default cell's first
    backticked value is YAML."""
    command, key = re.findall(r"`([^`]+)`", row[0])[:2]
    default = re.findall(r"`([^`]+)`", row[3])[0]
    return command.split(), key, yaml.safe_load(default)


ROWS = table_rows()


@pytest.fixture(scope="module")
def composed() -> dict[str, object]:
    return {cmd: compose(cmd.split()) for cmd in {" ".join(parse(r)[0]) for r in ROWS}}


@pytest.mark.parametrize("row", ROWS, ids=[" ".join(parse(r)[0] + [parse(r)[1]]) for r in ROWS])
def test_readme_default_equals_the_composed_config(row: list[str], composed) -> None:
    overrides, key, default = parse(row)
    cfg = composed[" ".join(overrides)]
    value = OmegaConf.select(cfg, key, throw_on_missing=True)
    value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    assert value == default, f"README says {key}={default!r} for `{' '.join(overrides)}`; --cfg job has {value!r}"


@pytest.mark.parametrize("row", ROWS, ids=[" ".join(parse(r)[0] + [parse(r)[1]]) for r in ROWS])
def test_each_row_names_a_source(row: list[str]) -> None:
    """A source, or where the sources are silent, "our reading" (what the harness chose)."""
    assert CITATION.search(row[4]) or OUR_READING in row[4], f"row {row[0]} cites no source: {row[4]!r}"


def test_yaml_cites_the_source_beside_each_task_constant() -> None:
    """The YAML line of each task-file constant in the table (its own line or the comment just above) cites."""
    for row in ROWS:
        overrides, key, _ = parse(row)
        task = next(o.split("=", 1)[1] for o in overrides if o.startswith("task="))
        if not key.startswith("task.") or any(o.startswith("model=") for o in overrides):
            continue   # per-model values: their lines in conf/model/*.yaml cite issue #176 (checked below)
        lines = (REPO / "conf" / "task" / f"{task}.yaml").read_text(encoding="utf-8").splitlines()
        at = -1   # each part's line after its parent's (grid.epochs: the grid's, not the top-level epochs), down to
        for part in key.split(".")[1:]:   # the deepest part with its own line (sets.short_fixed.batch_size: short_fixed)
            at = next((i for i, line in enumerate(lines) if i > at and line.lstrip().startswith(f"{part}:")), at)
        assert at >= 0, f"conf/task/{task}.yaml has no line for {key}"
        nearby = "\n".join(lines[max(0, at - 6): at + 3])
        ours = OUR_READING in row[4] and "our reading" in nearby   # the sources are silent: the YAML says so too
        assert CITATION.search(nearby) or "NB" in nearby or ours, f"conf/task/{task}.yaml: {key} cites no source nearby"
    for name in ("modernbert-base", "modernbert-large"):
        text = (REPO / "conf" / "model" / f"{name}.yaml").read_text(encoding="utf-8")
        assert re.search(r"gradient_accumulation_steps: \d+ +# .*issue #176", text)
