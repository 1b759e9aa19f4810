"""The charts page's drawings as plain shapes (rectangles, lines, points, labels with their
numbers), which `templates/charts.html` writes out as inline SVG: no script, nothing fetched,
every label and title a template value (escaped there). Only geometry is computed here; what is
drawn is `projections/reports/arms/charts.py`'s.

Colours are classes of the style sheet (`static/style.css`: `series-N` by a series' place,
`shade-N` by a pass rate in tenths), never from recorded text; the report's tree style would
otherwise win over an SVG presentation attribute, and the CSP allows no inline style.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

SERIES = 12  # series-0 .. series-11; the rest (`other`) is series-other
LABEL_W = 300
PLOT_W = 420
ROW_H = 18
LABEL_CHARS = 44


def short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def group_label(value: Any) -> str:
    return "(no value)" if value is None else str(value)


def _x(value: float, low: float, high: float) -> float:
    return round(LABEL_W + (value - low) / (high - low) * PLOT_W, 1) if high > low else LABEL_W


def _ticks(low: float, high: float, count: int = 5) -> list[dict[str, Any]]:
    step = (high - low) / (count - 1)
    return [
        {"x": _x(low + i * step, low, high), "text": f"{low + i * step:.2f}"} for i in range(count)
    ]


def interval_chart(
    rows: Sequence[dict[str, Any]], value: str, low: str, high: str, axis: tuple[float, float]
) -> dict[str, Any]:
    """One line per arm, under a heading line per group: its value as a point and its 95% interval
    as a bar (none drawn where there is none), on a shared axis."""
    lines: list[dict[str, Any]] = []
    y = ROW_H
    previous: Any = object()
    for row in rows:
        if row["group"] != previous:
            previous = row["group"]
            lines.append({"heading": True, "y": y + 12, "label": short(group_label(row["group"]))})
            y += ROW_H
        point = row[value]
        shown = {
            "heading": False,
            "y": y + 12,
            "mid": y + 8,
            "label": short(str(row["arm"]), LABEL_CHARS - 4),
            "full": f"{group_label(row['group'])} / {row['arm']}",
            "trials": row["trials"],
            "point": None if point is None else _x(point, *axis),
            "value": point,
            "low": row[low],
            "high": row[high],
            "x1": None if row[low] is None else _x(row[low], *axis),
            "x2": None if row[high] is None else _x(row[high], *axis),
        }
        lines.append(shown)
        y += ROW_H
    return {
        "width": LABEL_W + PLOT_W + 130,
        "height": y + 30,
        "axis_y": y + 4,
        "lines": lines,
        "ticks": _ticks(*axis),
        "left": LABEL_W,
        "right": LABEL_W + PLOT_W,
    }


def reward_axis(rows: Sequence[dict[str, Any]]) -> tuple[float, float]:
    """0 to 1, widened to every mean and bound shown (a reward need not lie in [0, 1])."""
    seen = [
        r[k] for r in rows for k in ("mean_reward", "reward_low", "reward_high") if r[k] is not None
    ]
    return (min([0.0, *seen]), max([1.0, *seen]))


def grid_chart(grid: dict[str, Any]) -> dict[str, Any]:
    """Tasks down, arms across; a cell's shade is its pass rate (red 0, green 1), grey with no
    scored trial."""
    cell_w, cell_h, left, top = 96, 22, 260, 150
    cols = {arm: i for i, arm in enumerate(grid["arms"])}
    rows = {task: i for i, task in enumerate(grid["tasks"])}
    cells = []
    for cell in grid["cells"]:
        rate = cell["pass_rate"]
        cells.append(
            {
                "x": left + cols[cell["arm"]] * cell_w,
                "y": top + rows[cell["task"]] * cell_h,
                "css": "shade-none" if rate is None else f"shade-{round(rate * 10)}",
                "text": "–" if rate is None else f"{rate:.2f} ({cell['passes']}/{cell['trials']})",
                "title": f"{group_label(cell['task'])} × {cell['arm']}: "
                f"{cell['passes']} of {cell['trials']} scored trials passed",
                **cell,
            }
        )
    return {
        "width": left + max(1, len(cols)) * cell_w + 10,
        "height": top + max(1, len(rows)) * cell_h + 10,
        "cell_w": cell_w,
        "cell_h": cell_h,
        "columns": [
            {
                "x": left + i * cell_w + cell_w / 2,
                "y": top - 6,
                "label": short(str(arm), 22),
                "full": arm,
            }
            for arm, i in cols.items()
        ],
        "rows": [
            {
                "x": left - 6,
                "y": top + i * cell_h + 15,
                "label": short(group_label(task), 36),
                "full": group_label(task),
            }
            for task, i in rows.items()
        ],
        "cells": cells,
    }


def timeline_charts(timeline: dict[str, Any]) -> dict[str, Any]:
    """Runs registered per unit of time as stacked bars, and each series' mean reward as a line."""
    buckets: list[datetime] = timeline["buckets"]
    # coloured here, not in the remembered answer
    series = [dict(line) for line in timeline["series"]]
    left, width, height, top = 60, 760, 180, 10
    n = max(1, len(buckets))
    step = width / n
    totals = [sum(s["runs"][i] for s in series) for i in range(len(buckets))]
    most = max([1, *totals])
    bars, lines = [], []
    for place, line in enumerate(series):
        line["colour"] = "series-other" if line["other"] else f"series-{place % SERIES}"
        line["label"] = "other" if line["other"] else group_label(line["group"])
    stacked = [0] * len(buckets)
    for line in series:
        for i, runs in enumerate(line["runs"]):
            if not runs:
                continue
            h = runs / most * height
            bars.append(
                {
                    "x": round(left + i * step + 1, 1),
                    "y": round(top + height - (stacked[i] + runs) / most * height, 1),
                    "w": round(max(1.0, step - 2), 1),
                    "h": round(h, 1),
                    "css": line["colour"],
                    "title": f"{line['label']}, "
                    f"{_when(buckets[i], timeline['unit'])}: {runs} run(s)",
                }
            )
            stacked[i] += runs
    rewards = [r for s in series for r in s["mean_reward"] if r is not None]
    low, high = min([0.0, *rewards]), max([1.0, *rewards])
    for line in series:
        points = [
            {
                "x": round(left + i * step + step / 2, 1),
                "y": round(top + height - (r - low) / (high - low) * height, 1),
                "title": f"{line['label']}, "
                f"{_when(buckets[i], timeline['unit'])}: mean reward {r:.3f}",
            }
            for i, r in enumerate(line["mean_reward"])
            if r is not None
        ]
        lines.append(
            {
                "colour": line["colour"],
                "points": points,
                "path": " ".join(f"{p['x']},{p['y']}" for p in points),
            }
        )
    labels = []
    every = max(1, n // 8)
    for i, bucket in enumerate(buckets):
        if i % every == 0:
            labels.append(
                {"x": round(left + i * step + step / 2, 1), "text": _when(bucket, timeline["unit"])}
            )
    return {
        "width": left + width + 10,
        "height": top + height + 40,
        "left": left,
        "right": left + width,
        "top": top,
        "bottom": top + height,
        "most": most,
        "low": low,
        "high": high,
        "bars": bars,
        "lines": lines,
        "labels": labels,
        "legend": [
            {"colour": s["colour"], "label": short(s["label"], 40), "full": s["label"]}
            for s in series
        ],
    }


def _when(moment: datetime, unit: str) -> str:
    if unit == "hour":
        return moment.strftime("%Y-%m-%d %H:00")
    if unit in ("day", "week"):
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m")
