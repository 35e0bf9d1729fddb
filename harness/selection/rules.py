"""Selection rules: from records only, which records stand for a model (``harness.select`` and the leaderboard call the
same rule); a *configuration* is a set of runs differing only in their seed (``config_id``)."""

from __future__ import annotations

import abc
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

from harness.core.data_origin import local_data
from harness.core.registry import Registry
from harness.core.results import STATUS_FAILED, STATUS_OK, ResultRecord, evaluated_subset, stable_hash
from harness.selection.comparable import set_aside_lines
from harness.specs import SelectionSpec
from harness.tasks.glue.spec import expected_seed_count, paper_baselines, paper_tasks, score_note

SCHEMA = "harness.selection/1"
#: seed-like hyperparameter keys, for records written before ``config_id`` existed
LEGACY_SEED_KEYS = ("seed", "random_seed", "data_seed", "train_seed")

Key = Callable[[ResultRecord], Any]
T = TypeVar("T")


def usable(r: ResultRecord) -> bool:
    """An ok record with a finite main score that is a cell of its own (not a composite's member)."""
    score = r.score
    return (r.status == STATUS_OK and isinstance(score, int | float) and math.isfinite(score)
            and not (r.details or {}).get("member_of"))


def _without_seeds(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_seeds(v) for k, v in value.items() if k not in LEGACY_SEED_KEYS}
    return value


def configuration(r: ResultRecord, *, per_dataset: bool) -> str:
    """A record's configuration: its ``config_id``, or (legacy) its hyperparameters less seed, precision, data."""
    if r.config_id:
        return r.config_id
    parts = [_without_seeds(r.hyperparameters or {}), r.precision]
    return stable_hash([*parts, r.data_fingerprint] if per_dataset else parts)


def summary(values: Sequence[float]) -> dict[str, float | None]:
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None}


def _column(cell: Any) -> Any:
    """A cell key's column: keys are (table, column) for families, plain dataset names otherwise."""
    return cell[-1] if isinstance(cell, tuple) else cell


def _seed(r: ResultRecord) -> int:
    hp = r.hyperparameters or {}
    train = hp.get("train")
    seed = hp.get("seed", train.get("seed") if isinstance(train, dict) else None)
    return seed if isinstance(seed, int) else 0


@dataclass
class Choice:
    """What a rule picked for one model: per cell, the records whose mean is reported, and remarks."""

    model: dict[str, Any]
    cells: dict[Any, list[ResultRecord]]
    summary: dict[str, Any] = field(default_factory=dict)
    remarks: dict[Any, str] = field(default_factory=dict)
    withheld: dict[Any, str] = field(default_factory=dict)


class SelectionRule(abc.ABC):
    """Picks, per model, the records that represent it; ``description`` is printed on the leaderboard."""

    description: str

    def choose(self, records: Iterable[ResultRecord], *, key: Key = lambda r: r.dataset,
               average_seeds: bool = True) -> dict[str, Choice]:
        """{model name: choice} over the usable records (``key`` maps a record to its cell)."""
        by_model: dict[str, list[ResultRecord]] = defaultdict(list)
        failed: dict[str, int] = defaultdict(int)
        aside: dict[str, list[ResultRecord]] = defaultdict(list)   # read in another score (selection.comparable)
        for r in records:
            name = str((r.model or {}).get("name") or (r.model or {}).get("path") or "unknown")
            if usable(r):
                by_model[name].append(r)
            elif r.status == STATUS_FAILED:
                failed[name] += 1
            elif (r.details or {}).get("set_aside"):
                aside[name].append(r)
        out = {}
        for name, recs in sorted(by_model.items()):
            # a subset run, or one on local data, never competes with a full run on the official data
            full = [r for r in recs if evaluated_subset(r) is None and local_data(r) is None]
            choice = self.choose_model(full or recs, key=key, average_seeds=average_seeds)
            if choice is not None:
                choice.summary = {"schema": SCHEMA, "task": recs[0].task, "model": choice.model,
                                  "selection_rule": self.description, "failed_runs": failed.get(name, 0),
                                  **({"set_aside": set_aside_lines(aside[name])} if aside.get(name) else {}),
                                  **choice.summary}
                out[name] = choice
        return out

    @abc.abstractmethod
    def choose_model(self, records: list[ResultRecord], *, key: Key, average_seeds: bool) -> Choice | None:
        """The choice among one model's usable records."""

    @abc.abstractmethod
    def format(self, choice: Choice) -> str:
        """A plain-text summary for ``harness.select``."""


def group_by(items: Iterable[T], key: Callable[[T], Any]) -> dict[Any, list[T]]:
    """``items`` by ``key``, each group in the order given."""
    groups: dict[Any, list[T]] = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    return groups


def _groups(records: Iterable[ResultRecord], *, per_dataset: bool, average_seeds: bool) -> list[list[ResultRecord]]:
    """The configurations among ``records`` (with ``average_seeds`` off, every run is one)."""
    return list(group_by(records, lambda r: configuration(r, per_dataset=per_dataset) if average_seeds
                         else r.run_id).values())


def _distinct_seeds(group: list[ResultRecord]) -> list[Any]:
    return sorted({(r.hyperparameters or {}).get("seed") for r in group}, key=str)


def incomplete(group: list[ResultRecord], expected: int) -> dict[str, Any]:
    """What the selection file says of a configuration some of whose seeds did not finish."""
    return {"hyperparameters": {k: v for k, v in (group[0].hyperparameters or {}).items() if k != "seed"},
            "seeds": _distinct_seeds(group), "expected_seeds": expected,
            "score": summary([float(r.score) for r in group]), "run_ids": sorted(r.run_id for r in group)}


class BestConfigPerDataset(SelectionRule):
    """GLUE's rule (appendix E.1): per dataset, the configuration with the best mean over its (complete) seeds."""

    description = ("per dataset, the configuration (every setting but the seed) with the best mean score over "
                   "its seeds")

    def __init__(self, expected: Callable[[ResultRecord], int | None] | None = None) -> None:
        self.expected = expected

    def choose_model(self, records: list[ResultRecord], *, key: Key, average_seeds: bool) -> Choice | None:
        sign = 1 if records[0].higher_is_better else -1
        cells, tasks, unselected = {}, {}, {}
        for cell, recs in sorted(group_by(records, key).items(), key=lambda kv: str(kv[0])):
            groups = _groups(recs, per_dataset=True, average_seeds=average_seeds)
            complete, partial = self._split(groups) if average_seeds else (groups, [])
            if not complete:
                unselected[cell] = {"why": "no configuration finished every seed its protocol asks for",
                                    "incomplete_configurations": partial}
                continue
            best = max(complete, key=lambda g: (sign * statistics.fmean(r.score for r in g), len(g),
                                                min(r.run_id for r in g)))
            best.sort(key=_seed)
            cells[cell] = best
            tasks[cell] = self.describe_cell(best, groups, recs) | (
                {"incomplete_configurations": partial} if partial else {})
        if not cells and not unselected:
            return None
        extra = {"unselected": unselected} if unselected else {}
        return Choice(records[0].model, cells, {"tasks": tasks, **extra},
                      remarks={c: _remark(t["incomplete_configurations"]) for c, t in tasks.items()
                               if t.get("incomplete_configurations")},
                      withheld={c: f"not selected: {u['why']}; {_remark(u['incomplete_configurations'])}"
                                for c, u in unselected.items()})

    def _split(self, groups: list[list[ResultRecord]]) -> tuple[list[list[ResultRecord]], list[dict[str, Any]]]:
        """(complete configurations, what is said of the incomplete ones)."""
        complete, partial = [], []
        for g in groups:
            want = self.expected(g[0]) if self.expected else None
            if want is None or len(_distinct_seeds(g)) >= want:
                complete.append(g)
            else:
                partial.append(incomplete(g, want))
        return complete, partial

    @staticmethod
    def describe_cell(best: list[ResultRecord], groups: list[list[ResultRecord]], recs: list[ResultRecord]) -> dict:
        metric_names = sorted(set().union(*(r.metrics for r in best)))
        return {"main_score": best[0].main_score, "score": summary([float(r.score) for r in best]),
                "metrics": {m: summary([float(r.metrics[m]) for r in best if m in r.metrics]) for m in metric_names},
                "hyperparameters": {k: v for k, v in best[0].hyperparameters.items() if k != "seed"},
                "seeds": [(r.hyperparameters or {}).get("seed") for r in best], "n_seeds": len(best),
                "best_epochs": [r.details.get("best_epoch") for r in best],
                "init_from_run_ids": sorted({r.details.get("init_from_run_id") for r in best} - {None}),
                "run_ids": [r.run_id for r in best], "n_configurations": len(groups), "n_runs": len(recs)}

    def format(self, choice: Choice) -> str:
        lines = [f"{choice.model.get('name')}: {self.description}"]
        for cell, t in choice.summary["tasks"].items():
            std = t["score"]["std"]
            hp = t["hyperparameters"]
            shown = ", ".join(f"{k}={hp[k]}" for k in list(hp)[:5])
            lines.append(f"  {cell!s:12s} {t['main_score']:18s} {t['score']['mean']:8.2f}"
                         f"{f' ± {std:.2f}' if std is not None else ''} (n={t['n_seeds']})  {shown}")
            lines += [f"  {'':12s} not selected, incomplete: {_incomplete_line(c)}"
                      for c in t.get("incomplete_configurations", ())]
        for cell, u in choice.summary.get("unselected", {}).items():
            lines.append(f"  {cell!s:12s} nothing selected: {u['why']}")
            lines += [f"  {'':12s} incomplete: {_incomplete_line(c)}" for c in u["incomplete_configurations"]]
        return "\n".join(lines)


def _remark(partial: list[dict[str, Any]]) -> str:
    """The page's note on the incomplete configurations of a cell."""
    return (f"{len(partial)} incomplete configuration(s) left out of the selection: "
            + "; ".join(_incomplete_line(c) for c in partial))


def _incomplete_line(c: dict[str, Any]) -> str:
    hp = c["hyperparameters"]
    shown = ", ".join(f"{k}={hp[k]}" for k in list(hp)[:3])
    return (f"{len(c['seeds'])} of {c['expected_seeds']} seeds finished (seeds {c['seeds']}; mean "
            f"{c['score']['mean']:.2f}), {shown}")


class BestRunOnSelectionSets(SelectionRule):
    """The paper's retrieval rule (appendix E.2): per model the configuration best on the selection sets, for all."""

    def __init__(self, datasets: Sequence[str]):
        self.datasets = tuple(datasets)
        self.description = ("one configuration per model: the best mean main score over the selection datasets "
                            f"(default {', '.join(self.datasets)}), reported on every dataset")

    def _wanted(self, records: list[ResultRecord]) -> tuple[str, ...]:
        for r in records:
            task = (r.config or {}).get("task") or {}
            configured = ((task.get("spec") or {}).get("selection") or {}).get("sets") or task.get("selection_datasets")
            if configured:
                return tuple(configured)
        return self.datasets

    def choose_model(self, records: list[ResultRecord], *, key: Key, average_seeds: bool) -> Choice | None:
        sign = 1 if records[0].higher_is_better else -1
        groups = _groups(records, per_dataset=False, average_seeds=average_seeds)
        cells_of = [{c: sorted(rs, key=_seed) for c, rs in group_by(g, key).items()} for g in groups]
        present = [set(c) for c in cells_of]
        wanted = self._wanted(records)
        basis = sorted((d for d in set().union(*present) if _column(d) in wanted), key=str)
        how = "selection datasets"
        eligible = [i for i, p in enumerate(present) if basis and set(basis) <= p]
        if not eligible:
            basis, how = sorted(set.intersection(*present), key=str), "datasets every run has"
            eligible = list(range(len(groups))) if basis else []
        if eligible:
            scored = [(sign * self._score(cells_of[i], basis), i) for i in eligible]
            ranked = sorted(scored, key=lambda s: (-s[0], self._run_id(groups[s[1]])))
        else:
            how = "most recent run (no dataset common to all runs)"
            ranked = sorted(((0.0, i) for i in range(len(groups))),
                            key=lambda s: max(r.created_at for r in groups[s[1]]), reverse=True)
        best = ranked[0][1]
        first = groups[best][0]
        return Choice(first.model, cells_of[best], {
            "selected_run_id": self._run_id(groups[best]),
            "selected_score": sign * ranked[0][0] if eligible else None,
            "selected_on": [_column(d) for d in basis], "basis": how,
            "hyperparameters": first.hyperparameters,
            "candidates": [{"run_id": self._run_id(groups[i]), "score": sign * s if eligible else None,
                            "lr": groups[i][0].hyperparameters.get("lr"),
                            "n_seeds": len({r.run_id for r in groups[i]})} for s, i in ranked],
            "missing_selection_datasets": sorted(set(wanted) - {_column(d) for d in set().union(*present)}),
            # same run id -> the trained model and the finished datasets are reused, only the rest is evaluated
            "next_command": f"python -m harness task={first.task} model={first.model.get('name')}"
                            + (f" task.lr={first.hyperparameters['lr']}" if "lr" in first.hyperparameters else ""),
        })

    @staticmethod
    def _score(cells: dict[Any, list[ResultRecord]], basis: Sequence[Any]) -> float:
        return statistics.fmean(statistics.fmean(r.score for r in cells[d]) for d in basis)

    @staticmethod
    def _run_id(group: list[ResultRecord]) -> str:
        return min(r.run_id for r in group)

    def format(self, choice: Choice) -> str:
        s = choice.summary
        lines = [f"{choice.model.get('name')}: best mean main score over {s['selected_on']} ({s['basis']})"]
        for c in s["candidates"]:
            mark = "*" if c["run_id"] == s["selected_run_id"] else " "
            score = "-" if c["score"] is None else f"{c['score']:.4f}"
            lines.append(f" {mark} lr={c['lr']!s:8s} mean {score}  {c['run_id']}")
        lines.append(f"  next: {s['next_command']}")
        return "\n".join(lines)


class LatestConfigPerColumn(SelectionRule):
    """Per column, the configuration with the newest record (MLDR: no sweep; a new source run supersedes)."""

    description = "per column, the most recent configuration (mean over its seeds); MLDR has no sweep to select on"

    def choose_model(self, records: list[ResultRecord], *, key: Key, average_seeds: bool) -> Choice | None:
        cells, tasks = {}, {}
        for cell, recs in group_by(records, key).items():
            groups = _groups(recs, per_dataset=True, average_seeds=average_seeds)
            newest = max(groups, key=lambda g: max(r.created_at for r in g))
            cells[cell] = newest
            tasks[cell] = {"score": summary([float(r.score) for r in newest]), "run_ids": [r.run_id for r in newest],
                           "lineage": newest[0].details.get("lineage"), "n_configurations": len(groups)}
        return Choice(records[0].model, cells, {"tasks": tasks})

    def format(self, choice: Choice) -> str:
        lines = [f"{choice.model.get('name')}: {self.description}"]
        for cell, t in choice.summary["tasks"].items():
            src = (t.get("lineage") or {}).get("run_id") or "model.path"
            lines.append(f"  {_column(cell)!s:24s} {t['score']['mean']:.4f}  run {t['run_ids'][0]}  (source: {src})")
        return "\n".join(lines)


def scoring_protocol(r: ResultRecord) -> str:
    """A GLUE record's ``task.scoring_protocol`` (records written before protocols existed: ``best_epoch``)."""
    return str((r.hyperparameters or {}).get("scoring_protocol", "best_epoch"))


class GlueSelection(SelectionRule):
    """Best configuration per task, the GLUE average and Table 5 rows; one scoring protocol per model."""

    per_task = BestConfigPerDataset(expected=lambda r: expected_seed_count(r.config))
    description = per_task.description

    def choose_model(self, records: list[ResultRecord], **kw: Any) -> Choice | None:
        protocol = scoring_protocol(max(records, key=lambda r: (r.created_at, r.run_id)))
        same = [r for r in records if scoring_protocol(r) == protocol]
        choice = self.per_task.choose_model(same, **kw)
        if choice is None:
            return None
        choice.summary |= {"scoring_protocol": protocol, "other_protocol_runs": len(records) - len(same)}
        tasks = choice.summary["tasks"] = {_column(k): v for k, v in choice.summary["tasks"].items()}
        if "unselected" in choice.summary:
            choice.summary["unselected"] = {_column(k): v for k, v in choice.summary["unselected"].items()}
        for t, sel in tasks.items():
            if note := score_note(t, sel.get("main_score")):
                sel["score_definition"] = note
        present = [t for t in paper_tasks() if t in tasks]
        missing = [t for t in paper_tasks() if t not in tasks]
        choice.summary |= {
            "glue_average": sum(tasks[t]["score"]["mean"] for t in present) / len(present) if present else None,
            "glue_average_over": present, "glue_average_complete": not missing, "missing_tasks": missing,
            "paper_baselines": paper_baselines(),
        }
        return choice

    def format(self, choice: Choice) -> str:
        text = self.per_task.format(choice)
        s = choice.summary
        if s["glue_average"] is not None:
            scope = "" if s["glue_average_complete"] else f" (partial: {len(s['glue_average_over'])} of 8 tasks)"
            text += f"\n  GLUE average {s['glue_average']:.2f}{scope}"
        other = f"; {s['other_protocol_runs']} runs of another protocol left out" if s["other_protocol_runs"] else ""
        return text + f"\n  scoring protocol: {s['scoring_protocol']} (task.scoring_protocol{other})"


#: selection rules by the name a task spec gives (``spec.selection.rule``); add a rule here when you add its class
RULES: Registry[type[SelectionRule]] = Registry("selection rule", {
    "best_run_on_sets": BestRunOnSelectionSets,
    "best_config_per_dataset": BestConfigPerDataset,
    "latest_config_per_column": LatestConfigPerColumn,
    "glue_best_config": GlueSelection,
}, hint="Add it to harness.selection.rules.RULES.")


@cache
def rule_for(spec: SelectionSpec) -> SelectionRule:
    """The rule a task spec's ``selection`` names (with its selection datasets, for the rule that takes them)."""
    cls = RULES.lookup(spec.rule)
    return BestRunOnSelectionSets(spec.sets) if cls is BestRunOnSelectionSets else cls()
