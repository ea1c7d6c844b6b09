"""Stacked bar charts as SVG geometry, computed on the server (no chart library, no CDN):
the template draws the rectangles, axis ticks and legend this module returns."""

import math
from dataclasses import dataclass, field
from decimal import Decimal

PALETTE = (
    "#2b59c3",
    "#2f8f46",
    "#d9622b",
    "#8e6ccf",
    "#e0a030",
    "#17a2b8",
    "#c62828",
    "#6b7280",
)
WIDTH, HEIGHT = 720, 200
LEFT, BOTTOM, TOP = 64, 24, 8


@dataclass
class Chart:
    width: int = WIDTH
    height: int = HEIGHT
    bars: list[dict] = field(default_factory=list)
    ticks: list[dict] = field(default_factory=list)
    labels: list[dict] = field(default_factory=list)
    legend: list[dict] = field(default_factory=list)
    axis_y: int = HEIGHT - BOTTOM
    left: int = LEFT
    empty: bool = True


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(value))
    for factor in (1, 2, 5, 10):
        if value <= factor * step:
            return float(factor * step)
    return float(10 * step)


def stacked(days: list, series: dict[str, list[float | Decimal]], *, money: bool = False) -> Chart:
    """One bar per day, stacked by series (each a list of one value per day)."""
    chart = Chart()
    names = list(series)
    colors = {name: PALETTE[index % len(PALETTE)] for index, name in enumerate(names)}
    chart.legend = [{"name": name or "(unnamed)", "color": colors[name]} for name in names]
    totals = [sum(float(series[n][i]) for n in names) for i in range(len(days))]
    top = _nice_ceiling(max(totals, default=0))
    plot_height = HEIGHT - BOTTOM - TOP
    slot = (WIDTH - LEFT) / max(len(days), 1)
    bar = max(2.0, slot * 0.7)
    for index, day in enumerate(days):
        x = LEFT + index * slot + (slot - bar) / 2
        y = float(HEIGHT - BOTTOM)
        for name in names:
            value = float(series[name][index])
            if value <= 0:
                continue
            height = plot_height * value / top
            y -= height
            chart.bars.append(
                {
                    "x": round(x, 1),
                    "y": round(y, 1),
                    "w": round(bar, 1),
                    "h": round(height, 1),
                    "color": colors[name],
                    "title": f"{day}: {name or '(unnamed)'} "
                    + (f"${value:,.4f}" if money else f"{int(value):,} tokens"),
                }
            )
            chart.empty = False
        if len(days) <= 14 or index % max(1, len(days) // 10) == 0:
            chart.labels.append({"x": round(x + bar / 2, 1), "text": day.strftime("%m-%d")})
    values = [top * step / 4 for step in range(5)]
    texts = money_ticks(values) if money else [f"{int(value):,}" for value in values]
    for step, text in enumerate(texts):
        chart.ticks.append({"y": round(HEIGHT - BOTTOM - plot_height * step / 4, 1), "text": text})
    return chart


def money_ticks(values: list[float]) -> list[str]:
    """Axis labels in US dollars with two decimals ("$0.38"); more only when two would
    print two ticks alike, as on an axis of fractions of a cent ("$0.0005")."""
    for decimals in range(2, 7):
        texts = [f"${value:,.{decimals}f}" for value in values]
        if len(set(texts)) == len(texts):
            return texts
    return texts


def axis_steps(peak: float, most: int = 5) -> list[int]:
    """The tick values of an axis from 0 that reaches ``peak``: 0 and the multiples of the
    roundest whole step (1, 2 or 5 times a power of ten) that gets there in at most
    ``most`` steps, the last at or above ``peak``. [0, 1] for a peak of 0."""
    if peak <= 0:
        return [0, 1]
    magnitude = 10 ** math.floor(math.log10(peak / most)) if peak > most else 1
    step = next(
        factor * magnitude
        for factor in (1, 2, 5, 10)
        if math.ceil(peak / (factor * magnitude)) <= most
    )
    return [step * k for k in range(math.ceil(peak / step) + 1)]
