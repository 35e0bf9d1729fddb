"""``series.html``: each series' metric against the training step, drawn here as static SVG (no script, no
library), with its band, the published reference lines and the best step marked, and the numbers as a table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from itertools import groupby
from pathlib import Path

from harness.leaderboard.series import Plot, Point

W, H = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 170, 30, 44
RUN, REF, BEST, BAND = "#d9822b", "#4a6fa5", "#1a7f37", "#d9822b"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round numbers (1, 2 or 5 x 10^k apart) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"


class Frame:
    """Data -> pixel coordinates of one plot: its steps across, its values, bands and reference lines up."""

    def __init__(self, plot: Plot) -> None:
        steps = [p.step for p in plot.points]
        ys = [p.value for p in plot.points] + [v for p in plot.points for v in (p.lo, p.hi) if v is not None]
        ys += [v for _, v, _ in plot.refs]
        lo, hi = min(ys), max(ys)
        pad = (hi - lo) * 0.08 or max(abs(hi) * 0.05, 0.5)
        self.x0, self.x1 = min(steps), max(steps)
        if self.x0 == self.x1:
            self.x0, self.x1 = self.x0 - 1, self.x1 + 1
        self.y0, self.y1 = lo - pad, hi + pad

    def x(self, step: float) -> float:
        return LEFT + (step - self.x0) / (self.x1 - self.x0) * (W - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return TOP + (self.y1 - value) / (self.y1 - self.y0) * (H - TOP - BOTTOM)


def _axes(f: Frame, plot: Plot) -> list[str]:
    out = [f'<line class="axis" x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="#999"/>',
           f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="#999"/>']
    for v in nice_ticks(f.y0, f.y1):
        y = f.y(v)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    steps = sorted({p.step for p in plot.points})
    ticks = steps if len(steps) <= 8 else nice_ticks(min(steps), max(steps), 6)
    for s in ticks:
        x = f.x(s)
        out.append(f'<line x1="{x:.1f}" y1="{H - BOTTOM}" x2="{x:.1f}" y2="{H - BOTTOM + 4}" stroke="#999"/>'
                   f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{s:g}</text>')
    scale = f" x{plot.scale:g}" if plot.scale != 1 else ""
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 8}" text-anchor="middle">training step</text>')
    out.append(f'<text x="14" y="{(TOP + H - BOTTOM) / 2:.0f}" text-anchor="middle" transform="rotate(-90 14 '
               f'{(TOP + H - BOTTOM) / 2:.0f})">{escape(plot.metric)}{scale}</text>')
    return out


def _band(f: Frame, points: Sequence[Point]) -> list[str]:
    out = []
    for banded, stretch in groupby(points, key=lambda p: p.lo is not None and p.hi is not None):
        if not banded:
            continue
        run = list(stretch)   # one shape per stretch of consecutive steps that have a band
        upper = [f"{f.x(p.step):.1f},{f.y(p.hi):.1f}" for p in run]            # type: ignore[arg-type]
        lower = [f"{f.x(p.step):.1f},{f.y(p.lo):.1f}" for p in reversed(run)]  # type: ignore[arg-type]
        if len(run) == 1:   # a lone step: an error bar
            x = f.x(run[0].step)
            out.append(f'<line class="band" x1="{x:.1f}" y1="{f.y(run[0].hi):.1f}" x2="{x:.1f}" '   # type: ignore[arg-type]
                       f'y2="{f.y(run[0].lo):.1f}" stroke="{BAND}" stroke-opacity=".45" stroke-width="6"/>')  # type: ignore[arg-type]
        else:
            out.append(f'<polygon class="band" points="{" ".join(upper + lower)}" fill="{BAND}" fill-opacity=".18"/>')
    return out


def _refs(f: Frame, plot: Plot) -> list[str]:
    """Dashed published lines, labelled in the right margin (labels pushed apart so none overlap)."""
    out, placed = [], []
    for name, value, text in sorted(plot.refs, key=lambda r: -r[1]):
        y = f.y(value)
        label_y = max(y, placed[-1] + 12) if placed else y
        placed.append(label_y)
        out.append(f'<g class="ref" data-ref="{escape(name)}" data-value="{value:g}">'
                   f'<title>{escape(name)}: {escape(text)} (published)</title>'
                   f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="{REF}" '
                   'stroke-dasharray="6 4" stroke-width="1.2"/>'
                   f'<text x="{W - RIGHT + 6}" y="{label_y + 4:.1f}" fill="{REF}">{escape(name)} {escape(text)}</text></g>')
    return out


def _series(f: Frame, plot: Plot) -> list[str]:
    pts = " ".join(f"{f.x(p.step):.1f},{f.y(p.value):.1f}" for p in plot.points)
    out = [f'<polyline class="metric" points="{pts}" fill="none" stroke="{RUN}" stroke-width="2"/>']
    for p in plot.points:
        band = (f"; {'seed spread ±1 sd' if p.band == 'seeds' else '95% bootstrap'} {_fmt(p.lo)}–{_fmt(p.hi)}"  # type: ignore[arg-type]
                if p.band else "")
        tokens = f"; {p.tokens_seen:,} tokens seen" if p.tokens_seen else ""
        out.append(f'<circle class="point" data-step="{p.step}" data-value="{p.value:.4f}" cx="{f.x(p.step):.1f}" '
                   f'cy="{f.y(p.value):.1f}" r="3.5" fill="{RUN}"><title>step {p.step}: {_fmt(p.value)}'
                   f' ({p.n} record{"s" if p.n != 1 else ""}{band}{tokens})</title></circle>')
    best = plot.best
    if best is not None:
        x, y = f.x(best.step), f.y(best.value)
        right = x > (LEFT + W - RIGHT) / 2      # the label on the side with room, clear of the axis
        out.append(f'<g class="best" data-step="{best.step}"><circle cx="{x:.1f}" cy="{y:.1f}" r="8" fill="none" '
                   f'stroke="{BEST}" stroke-width="2"/><text x="{x - 12 if right else x + 12:.1f}" y="{y - 10:.1f}" '
                   f'text-anchor="{"end" if right else "start"}" fill="{BEST}" font-weight="600">best: step '
                   f'{best.step}</text></g>')
    return out


def svg(plot: Plot) -> str:
    """One plot as an inline SVG element."""
    f = Frame(plot)
    title = f"{plot.series}: {plot.metric} on {plot.label} ({plot.task}) against the training step"
    body = [*_axes(f, plot), *_band(f, plot.points), *_refs(f, plot), *_series(f, plot)]
    return (f'<svg class="series-plot" data-series="{escape(plot.series)}" data-task="{escape(plot.task)}" '
            f'data-column="{escape(plot.column)}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
            f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
            + "".join(body) + "</svg>")


def _table(plot: Plot) -> str:
    rows, previous = [], None
    best = plot.best.step if plot.best else None
    for p in plot.points:
        change = f"{p.value - previous:+.2f}" if previous is not None else ""
        band = f"{_fmt(p.lo)}–{_fmt(p.hi)} ({p.band})" if p.band else ""   # type: ignore[arg-type]
        cls = ' class="best"' if p.step == best else ""
        rows.append(f"<tr{cls}><td>{p.step}</td><td>{p.value:.2f}</td><td>{change}</td><td>{band}</td>"
                    f"<td>{p.n}</td><td>{'' if p.tokens_seen is None else f'{p.tokens_seen:,}'}</td></tr>")
        previous = p.value
    return ("<table class=\"series-table\"><thead><tr><th>step</th><th>score</th><th>vs previous</th><th>band</th>"
            "<th>records</th><th>tokens seen</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


NOTE = ("Each point is a checkpoint's score (its newest weights; seeds averaged) on the leaderboard's scale. The "
        "shaded band is the seed spread (mean ± 1 sd) where a step has several seeds, else a 95% bootstrap interval "
        "over its queries or examples: a change between two steps smaller than the band is not evidence. Dashed "
        "lines are published numbers of the same column (the model's family first); the ringed point is the best "
        "step. ‡: computed on data that is not the official copy (not comparable with the published lines); "
        "§: on part of the dataset.")


def page(plots: Sequence[Plot]) -> str:
    """The whole page."""
    sections = []
    for name in sorted({p.series for p in plots}):
        figures = [f'<figure class="series-figure"><figcaption>{escape(p.label)} · {escape(p.task)} · '
                   f'{escape(p.metric)}{escape(p.marks)}</figcaption>{svg(p)}{_table(p)}</figure>'
                   for p in plots if p.series == name]
        sections.append(f'<section class="series" id="series-{escape(name)}"><h2>Series {escape(name)}</h2>'
                        + "".join(figures) + "</section>")
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Series: metric against training "
            "step</title><link rel=\"stylesheet\" href=\"style.css\"></head><body><header><h1>Series: metric against "
            f"training step</h1><p><a href=\"index.html\">← leaderboard</a></p><p class=\"note\">{escape(NOTE)}</p>"
            "</header><main>" + "".join(sections) + "</main></body></html>\n")


def write(plots: Sequence[Plot], out: Path) -> list[Path]:
    """``series.html`` in ``out`` (nothing when there is no series)."""
    if not plots:
        return []
    path = out / "series.html"
    path.write_text(page(plots), encoding="utf-8")
    return [path]
