"""Layout of a chain's valid times as a picture: each version a bar over the time it
held (one row per version, oldest on top), an arrow from each bar's end to the start of
the version that superseded it, and a line at the date picked.

Plain data for a server-rendered SVG (no script): the template only draws it.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from contextops.text import value_text

from .models import Fact

WIDTH = 880
LABEL_W = 170
ROW_H, BAR_H = 24, 14
TOP = 24


@dataclass
class Bar:
    fact: Fact
    label: str
    x: int
    y: int
    width: int
    start: datetime
    end: datetime | None  # None: still holds
    holds_at_pick: bool

    @property
    def mid_y(self) -> int:
        return self.y + BAR_H // 2

    @property
    def label_y(self) -> int:
        return self.y + BAR_H - 2


@dataclass
class Arrow:
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass
class Timeline:
    bars: list[Bar]
    arrows: list[Arrow]
    width: int
    height: int
    start: datetime | None
    end: datetime | None
    pick_x: int | None  # where the picked date falls, when it falls in the range


def valid_timeline(chain: list[Fact], now: datetime, at: datetime | None = None) -> Timeline:
    """Bars for the versions of ``chain`` (one page, oldest first) that held for a while;
    proposals and outdated writes never held and have none."""
    held = [f for f in chain if f.status in Fact.TIMELINE_STATUSES]
    if not held:
        return Timeline([], [], WIDTH, TOP, None, None, None)
    start = min(f.valid_from for f in held)
    end = max(
        [*(f.valid_until or now for f in held), now if any(f.is_valid for f in held) else start]
    )
    if at is not None:
        start, end = min(start, at), max(end, at)
    span = max((end - start).total_seconds(), 1.0)
    plot = WIDTH - LABEL_W - 12

    def x_of(moment: datetime) -> int:
        return LABEL_W + round((moment - start).total_seconds() / span * plot)

    bars = []
    for row, fact in enumerate(held):
        x = x_of(fact.valid_from)
        until = fact.valid_until or now
        bars.append(
            Bar(
                fact=fact,
                label=_label(fact),
                x=x,
                y=TOP + row * ROW_H,
                width=max(2, x_of(until) - x),
                start=fact.valid_from,
                end=fact.valid_until,
                holds_at_pick=at is not None
                and fact.valid_from <= at
                and (fact.valid_until is None or at < fact.valid_until),
            )
        )
    arrows = [
        Arrow(a.x + a.width, a.mid_y, b.x, b.y)
        for a, b in zip(bars, bars[1:], strict=False)
        if b.fact.supersedes_id == a.fact.pk
    ]
    return Timeline(
        bars=bars,
        arrows=arrows,
        width=WIDTH,
        height=TOP + len(bars) * ROW_H + 8,
        start=start,
        end=end,
        pick_x=x_of(at) if at is not None else None,
    )


def _label(fact: Fact) -> str:
    text = f"v{fact.version} {value_text(fact.value)}"
    return text if len(text) <= 26 else text[:25] + "…"


def day_end(moment: datetime) -> datetime:
    """The last instant of a picked day: "as of 3 March" reads what held all that day long."""
    return moment + timedelta(days=1) - timedelta(microseconds=1)


def picked(value: str, zone: Any) -> datetime | None:
    """The date a person picked (YYYY-MM-DD, in ``zone``) as an aware moment at the end
    of that day; None when it is empty or not a date."""
    try:
        day = datetime.strptime(value.strip(), "%Y-%m-%d")
    except ValueError:
        return None
    return day_end(day.replace(tzinfo=zone))
