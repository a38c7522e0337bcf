"""A small, byte-deterministic SVG plot writer for the site's per-pair charts.

matplotlib laid out and wrote every glyph as a path: about 0.3 s a chart, five charts a
pair, most of a cold site build. These charts are lines, points and stacked bars on
linear or base-2 axes, so they are written directly: text as <text> in the browser's sans
serif (the page's reader has one), every number printed with fixed precision, nothing
that varies between runs. Each chart is `WIDTH` units wide with width/height attributes
in px, so the page shows it at that size on a wide screen (text ≥ `SMALL` px) and the
site's stylesheet keeps it ≥ 640 px on phones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

WIDTH = 640.0
FONT = 12.0   # axis labels and titles
SMALL = 11.0  # tick labels and legend: the smallest text on any chart
CHAR = 0.62   # a generous mean glyph advance, in ems (layout only; Chromium checks it)
LINE = 1.45   # line height, in ems


def fmt(v: float) -> str:
    """A coordinate: two decimals, no negative zero."""
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def text_width(s: str, size: float) -> float:
    return len(s) * size * CHAR


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k steps) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < hi - step * 1e-9:
        ticks.append(round(value, 10))
    return ticks


def tick_label(v: float, ticks: list[float]) -> str:
    """Every tick with the fewest decimals that print all of them exactly (2.5, 0.25)."""
    decimals = next(d for d in range(5) if all(
        abs(t * 10 ** d - round(t * 10 ** d)) < 1e-6 for t in ticks) or d == 4)
    return f"{v:,.{decimals}f}"


@dataclass
class Series:
    label: str | None
    color: str
    points: list[tuple[float, float]]
    kind: str = "line"  # line | points | hline | vline
    dash: str | None = None
    marker: bool = False
    opacity: float = 1.0


@dataclass
class Plot:
    """One x/y chart: series, axis labels, optional title; legend below the axes."""

    xlabel: str
    ylabel: str
    title: str | None = None
    height: float = 340.0
    xlog2: bool = False
    series: list[Series] = field(default_factory=list)

    def line(self, xs: list[float], ys: list[float], color: str, label: str | None = None,
             dash: str | None = None, marker: bool = False) -> None:
        self.series.append(Series(label, color, list(zip(xs, ys, strict=True)), "line", dash,
                                  marker))

    def points(self, xs: list[float], ys: list[float], color: str, label: str | None = None,
               opacity: float = 1.0) -> None:
        self.series.append(Series(label, color, list(zip(xs, ys, strict=True)), "points",
                                  opacity=opacity))

    def hline(self, y: float, color: str, label: str | None = None,
              dash: str | None = None) -> None:
        self.series.append(Series(label, color, [(math.nan, y)], "hline", dash))

    def vline(self, x: float, color: str, label: str | None = None,
              dash: str | None = None) -> None:
        self.series.append(Series(label, color, [(x, math.nan)], "vline", dash))

    def _placed(self, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        """The points the x axis can place: on a log axis, those at x > 0 (a deployment
        that holds no request has a curve point at concurrency 0, which a log axis has no
        place for; the tables beside the chart state it)."""
        return [p for p in points if not self.xlog2 or math.isnan(p[0]) or p[0] > 0]

    def _range(self, axis: int) -> tuple[float, float]:
        values = [p[axis] for s in self.series for p in self._placed(s.points)
                  if not math.isnan(p[axis])]
        if not values:
            return 0.0, 1.0
        return min(values), max(values)

    def svg(self) -> bytes:
        xlo, xhi = self._range(0)
        ylo, yhi = self._range(1)
        pad = (yhi - ylo) * 0.05 or abs(yhi) * 0.05 or 0.5
        yticks = nice_ticks(ylo - pad, yhi + pad)
        if self.xlog2:
            lo_e, hi_e = math.floor(math.log2(max(xlo, 1e-9))), math.ceil(math.log2(xhi))
            xticks = [2.0 ** e for e in range(lo_e, max(hi_e, lo_e + 1) + 1)]
        else:
            xpad = (xhi - xlo) * 0.03 or 0.5
            xticks = nice_ticks(xlo - xpad, xhi + xpad)
        ylabels = [tick_label(v, yticks) for v in yticks]
        xlabels = [f"{v:g}" if self.xlog2 else tick_label(v, xticks) for v in xticks]
        left = 16 + FONT * LINE + max(text_width(s, SMALL) for s in ylabels)
        right = WIDTH - 16
        top = 12 + (FONT * LINE if self.title else 0)
        bottom = self.height - 14 - FONT * LINE - SMALL * LINE
        x0, x1 = xticks[0], xticks[-1]
        y0, y1 = yticks[0], yticks[-1]

        def sx(x: float) -> float:
            if self.xlog2:
                return left + (math.log2(x) - math.log2(x0)) / (
                    math.log2(x1) - math.log2(x0)) * (right - left)
            return left + (x - x0) / (x1 - x0) * (right - left)

        def sy(y: float) -> float:
            return bottom - (y - y0) / (y1 - y0) * (bottom - top)

        out: list[str] = []
        if self.title:
            out.append(_text((left + right) / 2, 12 + FONT, self.title, FONT, "middle"))
        for v, label in zip(yticks, ylabels, strict=True):
            y = sy(v)
            out.append(f'<line x1="{fmt(left)}" y1="{fmt(y)}" x2="{fmt(right)}" y2="{fmt(y)}" '
                       'stroke="#e6e6e6" stroke-width="1"/>')
            out.append(_text(left - 6, y + SMALL * 0.35, label, SMALL, "end"))
        for v, label in zip(xticks, xlabels, strict=True):
            x = sx(v)
            out.append(f'<line x1="{fmt(x)}" y1="{fmt(bottom)}" x2="{fmt(x)}" '
                       f'y2="{fmt(bottom + 4)}" stroke="#333333" stroke-width="1"/>')
            out.append(_text(x, bottom + 6 + SMALL, label, SMALL, "middle"))
        out.append(f'<path d="M{fmt(left)} {fmt(top)}V{fmt(bottom)}H{fmt(right)}" '
                   'fill="none" stroke="#333333" stroke-width="1"/>')
        ylabel_x = 6 + FONT
        out.append(f'<text x="{fmt(ylabel_x)}" y="{fmt((top + bottom) / 2)}" '
                   f'font-size="{fmt(FONT)}" text-anchor="middle" transform="rotate(-90 '
                   f'{fmt(ylabel_x)} {fmt((top + bottom) / 2)})">{escape(self.ylabel)}</text>')
        out.append(_text((left + right) / 2, bottom + 6 + SMALL * LINE + FONT, self.xlabel,
                         FONT, "middle"))
        for s in self.series:
            dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
            if s.kind == "hline":
                y = sy(s.points[0][1])
                out.append(f'<line x1="{fmt(left)}" y1="{fmt(y)}" x2="{fmt(right)}" '
                           f'y2="{fmt(y)}" stroke="{s.color}" stroke-width="1.2"{dash}/>')
            elif s.kind == "vline":
                x = sx(s.points[0][0])
                out.append(f'<line x1="{fmt(x)}" y1="{fmt(top)}" x2="{fmt(x)}" '
                           f'y2="{fmt(bottom)}" stroke="{s.color}" stroke-width="1.2"{dash}/>')
            elif s.kind == "line":
                d = "".join(f"{'M' if i == 0 else 'L'}{fmt(sx(x))} {fmt(sy(y))}"
                            for i, (x, y) in enumerate(self._placed(s.points)))
                out.append(f'<path d="{d}" fill="none" stroke="{s.color}" '
                           f'stroke-width="1.6"{dash}/>')
                if s.marker:
                    out += [f'<circle cx="{fmt(sx(x))}" cy="{fmt(sy(y))}" r="3" '
                            f'fill="{s.color}"/>' for x, y in self._placed(s.points)]
            else:
                opacity = f' fill-opacity="{fmt(s.opacity)}"' if s.opacity < 1 else ""
                out += [f'<circle cx="{fmt(sx(x))}" cy="{fmt(sy(y))}" r="3" '
                        f'fill="{s.color}"{opacity}/>' for x, y in self._placed(s.points)]
        entries = [(s.label, s.color, s.dash, s.kind) for s in self.series if s.label]
        legend, height = _legend(entries, self.height + 4)
        return document(out + legend, height)


def _text(x: float, y: float, s: str, size: float, anchor: str = "start") -> str:
    return (f'<text x="{fmt(x)}" y="{fmt(y)}" font-size="{fmt(size)}" '
            f'text-anchor="{anchor}">{escape(s)}</text>')


def _legend(entries: list[tuple[str, str, str | None, str]], top: float
            ) -> tuple[list[str], float]:
    """Legend entries in rows below the chart, wrapped to the width."""
    out: list[str] = []
    x, y = 16.0, top + SMALL
    for label, color, dash, kind in entries:
        width = 28 + text_width(label, SMALL) + 18
        if x + width > WIDTH - 8 and x > 16:
            x, y = 16.0, y + SMALL * LINE
        if kind == "points":
            out.append(f'<circle cx="{fmt(x + 10)}" cy="{fmt(y - SMALL * 0.35)}" r="3.5" '
                       f'fill="{color}"/>')
        elif kind == "bar":
            out.append(f'<rect x="{fmt(x)}" y="{fmt(y - SMALL * 0.8)}" width="20" '
                       f'height="{fmt(SMALL * 0.8)}" fill="{color}"/>')
        else:
            d = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<line x1="{fmt(x)}" y1="{fmt(y - SMALL * 0.35)}" x2="{fmt(x + 20)}" '
                       f'y2="{fmt(y - SMALL * 0.35)}" stroke="{color}" stroke-width="2"{d}/>')
        out.append(_text(x + 26, y, label, SMALL))
        x += width
    return out, (y + SMALL * 0.6 if entries else top)


def stacked_bars(rows: list[tuple[str, list[tuple[str, float]]]], colors: dict[str, str],
                 xlabel: str) -> bytes:
    """Horizontal stacked bars: (row label, [(part, value)]) top to bottom."""
    labels = [r[0] for r in rows]
    left = 16 + max(text_width(s, SMALL) for s in labels)
    right = WIDTH - 16
    bar, gap, top = 26.0, 14.0, 10.0
    bottom = top + len(rows) * (bar + gap)
    total = max(sum(v for _, v in parts) for _, parts in rows) or 1.0
    ticks = nice_ticks(0.0, total)

    def sx(v: float) -> float:
        return left + v / ticks[-1] * (right - left)

    out: list[str] = []
    for i, (label, parts) in enumerate(rows):
        y = top + gap / 2 + i * (bar + gap)
        out.append(_text(left - 6, y + bar / 2 + SMALL * 0.35, label, SMALL, "end"))
        start = 0.0
        for part, value in parts:
            if value > 0:
                out.append(f'<rect x="{fmt(sx(start))}" y="{fmt(y)}" '
                           f'width="{fmt(sx(start + value) - sx(start))}" '
                           f'height="{fmt(bar)}" fill="{colors[part]}"/>')
            start += value
    for v in ticks:
        x = sx(v)
        out.append(f'<line x1="{fmt(x)}" y1="{fmt(bottom)}" x2="{fmt(x)}" '
                   f'y2="{fmt(bottom + 4)}" stroke="#333333" stroke-width="1"/>')
        out.append(_text(x, bottom + 6 + SMALL, tick_label(v, ticks), SMALL, "middle"))
    out.append(f'<path d="M{fmt(left)} {fmt(top)}V{fmt(bottom)}H{fmt(right)}" fill="none" '
               'stroke="#333333" stroke-width="1"/>')
    axis_bottom = bottom + 6 + SMALL * LINE + FONT
    out.append(_text((left + right) / 2, axis_bottom, xlabel, FONT, "middle"))
    legend, height = _legend([(part, colors[part], None, "bar") for part in colors],
                             axis_bottom + 10)
    return document(out + legend, height)


def document(body: list[str], height: float) -> bytes:
    h = fmt(math.ceil(height + 6))
    head = (f'<?xml version="1.0" encoding="utf-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{fmt(WIDTH)}" height="{h}" viewBox="0 0 {fmt(WIDTH)} {h}" '
            'font-family="DejaVu Sans, Verdana, sans-serif" fill="#222222">\n'
            f'<rect width="{fmt(WIDTH)}" height="{h}" fill="#ffffff"/>\n')
    return (head + "\n".join(body) + "\n</svg>\n").encode()
