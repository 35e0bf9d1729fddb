"""``python -m harness.compare RUN RUN RUN ...``: the rows (cells, table averages) of every model pair, corrected
across all of them, with tie groups and rank intervals, as lines of text."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.compare import many
from harness.compare.entrants import Cell, Entrant
from harness.compare.outcomes import read_runs
from harness.compare.stats import CONTROLS
from harness.errors import HarnessError


@dataclass
class Comparison:
    """Every tested row, what could not be tested, and the family the correction ran over."""

    rows: list[many.Row]
    settings: many.Settings
    higher_is_better: bool
    family: int = 0
    untested: dict[Cell, dict[str, str]] = field(default_factory=dict)


def untested_reason(e: Entrant, cell: Cell) -> str | None:
    if cell in e.withheld:
        return f"incomplete, not tested: {e.withheld[cell]}"
    if cell not in e.cells:
        return "no record"
    if not all((r.details or {}).get("per_query") for _, r in e.cells[cell]):
        return "keeps no per-query scores (written before they were stored): re-run it to test it"
    return None


def compare_entrants(entrants: list[Entrant], s: many.Settings, metric: str | None) -> Comparison:
    """Each cell's rows, then each table's average, then the correction across all their pairs and the groups."""
    cells = sorted({c for e in entrants for c in (*e.cells, *e.withheld)})
    first = next((r for e in entrants for recs in e.cells.values() for _, r in recs), None)
    if first is None:   # every cell of every model was withheld by its selection (seeds missing everywhere)
        said = next((f" ({e.label}, {'/'.join(c)}: {why})" for e in entrants for c, why in e.withheld.items()), "")
        raise HarnessError(f"nothing to test: no model has a cell its selection kept{said}; finish the missing runs "
                           "(python -m harness.select lists them), then compare again")
    hib = bool(first.higher_is_better)
    out = Comparison([], s, hib)
    kept: dict[Cell, dict[str, many.Outcomes]] = {}
    reps: dict[Cell, dict[str, many.twolevel.Replicates]] = {}
    for i, cell in enumerate(cells):
        why = {e.label: w for e in entrants if (w := untested_reason(e, cell))}
        out.untested[cell] = {x: w for x, w in why.items() if w != "no record"}
        ready = [e for e in entrants if e.label not in why]
        if len(ready) < 2:
            continue
        where = "/".join(cell)
        runs = {e.label: read_runs(e.cells[cell], where) for e in ready}
        name = metric or ready[0].cells[cell][0][1].main_score
        kept[cell] = many.cell_outcomes(runs, name, where)
        row, reps[cell] = many.cell_row(cell[0], cell[1], kept[cell], s, hib, i)
        out.rows.append(row)
    for table in sorted({c[0] for c in kept}):
        out.rows += _average(table, kept, reps, s, hib)
    out.family = many.correct(out.rows, s.correction)
    for row in out.rows:
        many.group(row, s.alpha, hib)
    return out


def _average(table: str, kept: dict[Cell, dict[str, many.Outcomes]], reps: dict, s: many.Settings, hib: bool
             ) -> list[many.Row]:
    """The table's average over the cells every model tested in the table has (none for fewer than two)."""
    mine = [c for c in kept if c[0] == table]
    labels = sorted({x for c in mine for x in kept[c]})
    shared = [c for c in mine if all(x in kept[c] for x in labels)]
    if len(shared) < 2:
        return []
    cols = {c[1]: {x: kept[c][x] for x in labels} for c in shared}
    r = {c[1]: reps[c] for c in shared}
    return [many.average_row(table, [c[1] for c in shared], cols, r, s, hib)]


def lines(cmp: Comparison, entrants: list[Entrant]) -> list[str]:
    """Everything the many-model comparison prints."""
    s = cmp.settings
    pct = f"{s.level:.0%}"
    out = ["models:"] + [f"  {e.label}: " + ("what harness.select picks in each cell (a configuration: the mean of "
                                             "its seeds, counted under runs)" if e.how == "selection" else
                                             "this run (one run per cell)") for e in entrants]
    n_rows = len(cmp.rows)
    out += [f"tests, B - A: one run each: paired randomization test (two-sided, {s.permutations} permutations, seed "
            f"{s.seed}) and paired bootstrap {pct} interval; seeds on either side: two-level bootstrap over items "
            f"and seeds ({s.permutations} resamples), p and {pct} interval from Student's t (Welch-Satterthwaite df)",
            f"family: {cmp.family} tests ({n_rows} row(s) x their model pairs) corrected together by {s.correction}:"
            f" {CONTROLS[s.correction]} at {s.alpha:g}",
            "groups: models that share a letter are separated by no corrected test (compact letter display); "
            f"rank {pct}: the bootstrap interval of the model's rank"]
    for row in cmp.rows:
        out += ["", *row_lines(row, cmp)]
    if not cmp.rows:
        out += ["", "no cell has two models to test (each needs kept per-query scores and complete seeds)"]
    quiet = {c: w for c, w in cmp.untested.items() if w}
    if quiet:
        out += ["", "not tested:"]
        out += [f"  {'/'.join(c)}: {x}: {w}" for c, ws in quiet.items() for x, w in ws.items()]
    return out


def row_lines(row: many.Row, cmp: Comparison) -> list[str]:
    """One row: its models ranked with score, runs, group and rank interval, then every pair."""
    dec = 4 if all(abs(v) <= 1 for v in row.scores.values()) else 2
    head = (f"{row.table} / {row.name}: {row.metric}, {row.n} items" if not row.over else
            f"{row.table} / average over {len(row.over)} cells ({', '.join(row.over)}), each weighted equally")
    width = max(24, *(len(x) for x in row.scores))
    out = [head, f"  {'rank':>4s}  {'model':{width}s} {'score':>9s} {'runs':>4s}  {'group':6s} rank {cmp.settings.level:.0%}"]
    for x in many.order(row.scores, cmp.higher_is_better):
        rank, lo, hi = row.ranks[x]
        out.append(f"  {rank:4d}  {x:{width}s} {row.scores[x]:9.{dec}f} {row.runs[x]:4d}  {row.groups[x]:6s} "
                   f"[{lo}, {hi}]")
    for p in row.pairs:
        df = f" df {p.df:.0f}" if p.df is not None and p.df < 1e6 else ""
        out.append(f"    {p.b} - {p.a}: {p.diff:+.{dec}f} [{p.low:+.{dec}f}, {p.high:+.{dec}f}]  p {_p(p.p)}  "
                   f"p {cmp.settings.correction} {_p(p.p_adjusted)}"
                   f"{' *' if p.p_adjusted < cmp.settings.alpha else ''}  ({p.method}{df})")
    return out


def _p(value: float) -> str:
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"
