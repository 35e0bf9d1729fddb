"""``python -m harness.compare RUN RUN [RUN ...]``: the rows of every model pair, corrected across all of them, with
tie groups and rank intervals, as text; two models are printed as one A/B table."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.compare import many, stats
from harness.compare.entrants import Cell, Entrant
from harness.compare.outcomes import read_runs
from harness.core.errors import HarnessError


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
    kept: dict[str, dict[str, dict[str, many.Outcomes]]] = {}   # table -> column -> model -> outcomes
    reps: dict[str, dict[str, dict[str, many.twolevel.Replicates]]] = {}
    for i, cell in enumerate(cells):
        why = {e.label: w for e in entrants if (w := untested_reason(e, cell))}
        out.untested[cell] = {x: w for x, w in why.items() if w != "no record"}
        ready = [e for e in entrants if e.label not in why]
        if len(ready) < 2:
            continue
        (table, col), where = cell, "/".join(cell)
        runs = {e.label: read_runs(e.cells[cell], where) for e in ready}
        name = metric or ready[0].cells[cell][0][1].main_score
        outs = kept.setdefault(table, {})[col] = many.cell_outcomes(runs, name, where)
        row, reps.setdefault(table, {})[col] = many.cell_row(table, col, outs, s, hib, i)
        out.rows.append(row)
    for table in sorted(kept):
        out.rows += _average(table, kept[table], reps[table], s, hib)
    if not out.rows:
        raise HarnessError(nothing_tested(entrants, out.untested))
    out.family = many.correct(out.rows, s.correction)
    for row in out.rows:
        many.group(row, s.alpha, hib)
    return out


def nothing_tested(entrants: list[Entrant], untested: dict[Cell, dict[str, str]]) -> str:
    """Why no row could be tested: each shared cell's reason, or no dataset two models share."""
    said = next((f" ({x}, {'/'.join(c)}: {w})" for c, ws in untested.items() for x, w in ws.items()), "")
    if said:
        return f"nothing to test: no cell has two models with kept scores{said}; fix that, then compare again"
    held = "; ".join(f"{e.label}: {', '.join(c[1] for c in e.cells)}" for e in entrants)
    return (f"nothing to test: the {len(entrants)} models share no dataset ({held}); compare runs evaluated on the "
            "same datasets")


def _average(table: str, kept: dict[str, dict[str, many.Outcomes]], reps: dict, s: many.Settings, hib: bool
             ) -> list[many.Row]:
    """The table's average over the cells every model tested in the table has (none for fewer than two)."""
    labels = sorted({x for outs in kept.values() for x in outs})
    shared = [c for c, outs in kept.items() if all(x in outs for x in labels)]
    return [many.average_row(table, shared, labels, kept, reps, s, hib)] if len(shared) >= 2 else []


def lines(cmp: Comparison, entrants: list[Entrant]) -> list[str]:
    """Everything the comparison prints: the A/B table for two models, every pair's rows for more."""
    if len(entrants) == 2:
        return two_lines(cmp, entrants)
    s = cmp.settings
    pct = f"{s.level:.0%}"
    out = ["models:"] + [f"  {e.label}: " + ("what harness.select picks in each cell (a configuration: the mean of "
                                             "its seeds, counted under runs)" if e.how == "selection" else
                                             "this run (one run per cell)") for e in entrants]
    out += [f"tests, B - A: one run each: paired randomization test (two-sided, {s.permutations} permutations, seed "
            f"{s.seed}) and paired bootstrap {pct} interval; seeds on either side: two-level bootstrap over items "
            f"and seeds ({s.permutations} resamples), p and {pct} interval from Student's t (Welch-Satterthwaite df)",
            f"family: {cmp.family} tests ({len(cmp.rows)} row(s) x their model pairs) corrected together by {s.correction}:"
            f" {stats.CONTROLS[s.correction]} at {s.alpha:g}",
            "groups: models that share a letter are separated by no corrected test (compact letter display); "
            f"rank {pct}: the bootstrap interval of the model's rank"]
    for row in cmp.rows:
        out += ["", *row_lines(row, cmp)]
    return out + untested_lines(cmp)


def untested_lines(cmp: Comparison) -> list[str]:
    out: list[str] = []
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


def two_lines(cmp: Comparison, entrants: list[Entrant]) -> list[str]:
    """Two models: one A/B table (B - A per cell, table averages and their tests) of :func:`compare_entrants`."""
    s, (a, b) = cmp.settings, entrants
    pct = f"{s.level:.0%}"
    many_runs = not (a.single() and b.single())
    picks = " (what harness.select picks: each cell the mean of its configuration's seeds)"
    out = [f"{x} = {e.label}" + (picks if e.how == "selection" and not e.single() else "")
           for x, e in zip("AB", (a, b), strict=True)]
    out += [f"metric {cmp.rows[0].metric or 'the cells main score'}; B - A; paired randomization test (two-sided, "
            f"{s.permutations} permutations, seed {s.seed}); paired bootstrap {pct} interval ({s.permutations} "
            "resamples)" + ("; seeds on either side: two-level bootstrap over items and seeds, Student's t" if many_runs
                            else "") + f"; p corrected across {cmp.family} test(s), the rows below: {s.correction}; * "
            f"where the corrected p < {s.alpha:g}",
            f"{'dataset':24s} {'n':>6s} {'A':>8s} {'B':>8s} {'B-A':>8s} {pct + ' interval':>20s} {'p':>8s} "
            f"{'p ' + s.correction:>10s}"]
    tables = sorted({r.table for r in cmp.rows})
    for table in tables:
        rows = [r for r in cmp.rows if r.table == table]
        for row in rows:
            name = (f"average ({len(row.over)} sets)" if row.over else row.name) if len(tables) == 1 else \
                f"{table}/{'average' if row.over else row.name}"
            out.append(ab_row(name, row, a.label, s.alpha))
            if row.over and row.pairs[0].method == "randomization":
                out.append("  (macro average of the datasets' means; queries permuted and resampled within their "
                           "dataset)")
        cells = [r for r in rows if not r.over]
        if len(cells) > 1:
            out += per_set_lines(cells, a.label, b.label, s)
    return out + untested_lines(cmp)


def ab_row(name: str, row: many.Row, first: str, alpha: float) -> str:
    """One row of the A/B table: ``row``'s one pair, as B - A."""
    (p,) = row.pairs
    sign = 1.0 if p.a == first else -1.0
    diff, low, high = sign * p.diff, min(sign * p.low, sign * p.high), max(sign * p.low, sign * p.high)
    other = p.b if p.a == first else p.a
    dec = 4
    df = f"  (two-level df {p.df:.0f})" if p.method == "two-level" and p.df is not None and p.df < 1e6 else \
        "  (two-level)" if p.method == "two-level" else ""
    interval = f"[{low:+.{dec}f}, {high:+.{dec}f}]"
    mark = " *" if p.p_adjusted < alpha else ""
    return (f"{name:24s} {row.n:6d} {row.scores[first]:8.{dec}f} {row.scores[other]:8.{dec}f} {diff:+8.{dec}f} "
            f"{interval:>20s} {p.p:8.4f} {p.p_adjusted:10.4f}{mark}{df}")


def per_set_lines(cells: list[many.Row], a: str, b: str, s: many.Settings) -> list[str]:
    """The paired test over the cells' own scores (is B better on datasets like these?), with its caveat."""
    k = len(cells)
    r = stats.paired(np.array([c.scores[a] for c in cells]), np.array([c.scores[b] for c in cells]),
                     s.permutations, s.seed, s.level)
    how = f"exact over all 2^{k} sign flips" if k <= 16 else f"{s.permutations} permutations"
    return [f"over the {k} per-dataset scores: B-A {r.diff:+.4f}, randomization p {r.p_randomization:.4f} ({how}), "
            f"t-test p {r.p_t:.4f}, {s.level:.0%} interval [{r.ci_low:+.4f}, {r.ci_high:+.4f}]",
            f"  caveat: {k} datasets are few; this asks whether B is better on datasets like these, and has little "
            "power (with 5 or fewer sets no p can fall below 0.06)"]
