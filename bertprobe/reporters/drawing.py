"""Figure specs (``bertprobe.results.figures``) drawn with matplotlib on the Agg backend (no display), with
matplotlib's own fonts, as inline SVG for the HTML report. The only module that imports matplotlib; no
probe imports it."""

from __future__ import annotations

import io
import math
import textwrap
import warnings
from typing import Any

from bertprobe.results.figures import KINDS


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


# Text sizes in points. The SVG is drawn 6.4 in wide and shown at its own size (1 pt = 4/3 px), so 8.5 pt
# is 11.3 px: the smallest text in a figure (ticks, counts in cells, legends) stays readable.
SMALL_PT = 8.5
LABEL_PT = 9.0
TITLE_PT = 10.0
TITLE_CHARS = 60  # a title wraps at this width so that it fits above the axes


def _integer_axis(axis: Any, values: list[Any]) -> None:
    """Whole-number ticks on an axis whose values are all whole numbers (iterations, counts)."""
    from matplotlib.ticker import MaxNLocator

    finite = _finite(values)
    if finite and max(abs(v) for v in finite) >= 2 and all(float(v).is_integer() for v in finite):  # 0/1 may be shares
        axis.set_major_locator(MaxNLocator(integer=True))


def _thresholds(ax: Any, data: dict[str, Any]) -> None:
    for line in data.get("thresholds") or []:
        ax.axhline(float(line["value"]), color="tab:red", linestyle="--", linewidth=1.2, label=line.get("label"))


def _legend(ax: Any) -> None:
    """A legend beside the axes, never over a bar or a point."""
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=SMALL_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def _finite(values: list[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(float(v))]


def _heatmap(ax: Any, fig: Any, spec: dict[str, Any]) -> None:
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    data = spec["data"]
    matrix = np.array([[float("nan") if v is None else float(v) for v in row] for row in data["matrix"]], dtype=float)
    scale = spec.get("scale") or {}
    lo = scale.get("min", np.nanmin(matrix) if np.isfinite(matrix).any() else 0.0)
    hi = scale.get("max", np.nanmax(matrix) if np.isfinite(matrix).any() else 1.0)
    if scale.get("center") is not None:
        c = float(scale["center"])
        span = max(abs(hi - c), abs(c - lo), 1e-12)
        norm = TwoSlopeNorm(vcenter=c, vmin=c - span, vmax=c + span)
        image = ax.imshow(matrix, cmap="RdBu", norm=norm, aspect="auto")
    else:
        image = ax.imshow(matrix, cmap="viridis", vmin=lo, vmax=hi if hi > lo else lo + 1e-12, aspect="auto")
    rows, cols = data.get("rows") or [], data.get("cols") or []
    if cols and len(cols) <= 40:
        ax.set_xticks(range(len(cols)), [str(c) for c in cols], rotation=90 if len(cols) > 12 else 0, fontsize=SMALL_PT)
    if rows and len(rows) <= 40:
        ax.set_yticks(range(len(rows)), [str(r) for r in rows], fontsize=SMALL_PT)
    if matrix.size <= 144:
        integers = bool(np.all(np.mod(matrix[np.isfinite(matrix)], 1) == 0))
        for (i, j), v in np.ndenumerate(matrix):
            if np.isfinite(v):
                r, g, b, _ = image.cmap(image.norm(v))
                ink = "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"  # readable on dark cells
                ax.text(j, i, f"{v:.0f}" if integers else f"{v:.2f}", ha="center", va="center", fontsize=SMALL_PT, color=ink)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(spec.get("colorbar", ""), fontsize=LABEL_PT)
    bar.ax.tick_params(labelsize=SMALL_PT)
    _integer_axis(bar.ax.yaxis, matrix.flatten().tolist())


def _line(ax: Any, spec: dict[str, Any]) -> None:
    data = spec["data"]
    xs: list[Any] = []
    for series in data.get("series") or []:
        x = series.get("x") or list(range(len(series["y"])))
        xs += list(x)
        ax.plot(x, series["y"], marker="o", markersize=3, label=series.get("name"))
    band = data.get("band")
    if band:
        ax.axhspan(float(band[0]), float(band[1]), color="tab:green", alpha=0.12, label=data.get("band_label", "tolerance"))
    _thresholds(ax, data)
    for mark in data.get("marks") or []:
        ax.axvline(float(mark["x"]), color="tab:red", linestyle="--", linewidth=1)
        ax.annotate(str(mark.get("label", "")), (float(mark["x"]), ax.get_ylim()[1]), fontsize=SMALL_PT,
                    ha="left", va="top", color="tab:red")
    _integer_axis(ax.xaxis, xs)
    _legend(ax)


def _bars(ax: Any, spec: dict[str, Any]) -> None:
    import numpy as np

    data = spec["data"]
    labels = [str(x) for x in data.get("labels") or []]
    series = data.get("series") or []
    x = np.arange(len(labels))
    stacked = bool(data.get("stacked"))
    width = 0.8 if stacked else 0.8 / max(len(series), 1)
    bottom = np.zeros(len(labels))
    for k, s in enumerate(series):
        values = np.array([float("nan") if v is None else float(v) for v in s["values"]])
        errors = s.get("errors")
        yerr = None
        if errors:
            yerr = np.array([[v - e[0], e[1] - v] if e else [0, 0] for v, e in zip(values, errors)]).T
        pos = x if stacked else x - 0.4 + width * (k + 0.5)
        ax.bar(pos, values, width, bottom=bottom if stacked else None, yerr=yerr, capsize=3, label=s.get("name"))
        if stacked:
            bottom = bottom + np.nan_to_num(values)
    ref = data.get("reference")
    if ref:
        ax.axhline(float(ref["value"]), color="black", linestyle=":", linewidth=1, label=ref.get("label"))
    _thresholds(ax, data)
    crowded = sum(len(lab) for lab in labels) > 60
    ax.set_xticks(x, labels, rotation=45 if crowded else 0, ha="right" if crowded else "center", fontsize=SMALL_PT)
    _integer_axis(ax.yaxis, [v for s in series for v in s["values"]])
    if len(series) > 1 or ref or data.get("thresholds"):
        _legend(ax)


def _scatter(ax: Any, spec: dict[str, Any]) -> None:
    data = spec["data"]
    points = data.get("points") or []
    ax.scatter([p["x"] for p in points], [p["y"] for p in points], s=12)
    for p in points:
        if p.get("label"):
            ax.annotate(str(p["label"]), (p["x"], p["y"]), fontsize=SMALL_PT, xytext=(3, 3), textcoords="offset points")
    ref = data.get("reference") or {}
    if ref.get("y") is not None:
        ax.axhline(float(ref["y"]), color="black", linestyle=":", linewidth=1)
    if ref.get("x") is not None:
        ax.axvline(float(ref["x"]), color="black", linestyle=":", linewidth=1)


def render_svg(spec: dict[str, Any], width: float = 6.4, height: float | None = None) -> str:
    """Draw one spec as an inline SVG string (raises ValueError for a spec it cannot draw)."""
    kind = spec.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown figure kind {kind!r}; use {', '.join(KINDS)}")
    if not isinstance(spec.get("data"), dict):
        raise ValueError("a figure spec needs a data mapping")
    plt = _pyplot()
    if height is None:
        rows = len((spec["data"].get("matrix") or [])) if kind == "heatmap" else 0
        height = min(9.0, max(3.2, 0.22 * rows + 1.2)) if kind == "heatmap" else 3.4
    fig, ax = plt.subplots(figsize=(width, height))
    try:
        {"heatmap": lambda: _heatmap(ax, fig, spec), "line": lambda: _line(ax, spec), "bars": lambda: _bars(ax, spec),
         "scatter": lambda: _scatter(ax, spec)}[kind]()
        ax.set_title(textwrap.fill(str(spec.get("title", "")), TITLE_CHARS), fontsize=TITLE_PT)
        ax.tick_params(labelsize=SMALL_PT)
        axes = spec.get("axes") or {}
        if axes.get("x"):
            ax.set_xlabel(str(axes["x"]), fontsize=LABEL_PT)
        if axes.get("y"):
            ax.set_ylabel(str(axes["y"]), fontsize=LABEL_PT)
        with warnings.catch_warnings():  # "Tight layout not applied" (a long legend): savefig's tight box still fits it
            warnings.simplefilter("ignore", UserWarning)
            fig.tight_layout()
        buffer = io.StringIO()
        with warnings.catch_warnings():  # a model's token the font lacks (Thai, say) is drawn as a box, not reported
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
            fig.savefig(buffer, format="svg", bbox_inches="tight")  # the legend beside the axes included
    finally:
        plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and doctype: the SVG sits inline in HTML


