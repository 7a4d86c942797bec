"""Measuring a laid-out chart: every text's and legend's box from the renderer, and what collides.

One helper for every chart kind's test: a tick label on its neighbour (128 and 136), a legend over a
panel, a title over a panel title, a footer off the figure all show as a line of the list returned.
"""

from __future__ import annotations

from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

PAD_PX = 0.5  # boxes that only touch (a pixel apart after rounding) do not count


def _all_axes(fig) -> list[Axes]:
    out = []
    for ax in fig.axes:
        if ax.get_visible():
            out.append(ax)
            out += [c for c in ax.child_axes if c.get_visible()]  # secondary (MFU %, HBM %) axes
    return out


def _tick_labels(ax: Axes, r) -> list[tuple[str, Bbox]]:
    """The tick labels the axis draws (those inside its view limits), with their boxes."""
    out = []
    for axis in (ax.xaxis, ax.yaxis):
        if not axis.get_visible():
            continue
        for tick in axis._update_ticks():  # the ticks drawn: inside the view interval
            for lab in (tick.label1, tick.label2):
                if lab.get_visible() and lab.get_text():
                    out.append((f"tick {lab.get_text()!r}", lab.get_window_extent(r)))
    return out


def text_boxes(fig, r) -> list[tuple[str, Bbox, Any]]:
    """(name, box, owner) of every visible text of the figure: titles, footer, axis and tick labels,
    texts inside panels. The owner tells apart texts that belong together (one axes' in-panel notes)."""
    out: list[tuple[str, Bbox, Any]] = []
    for name, t in (("suptitle", fig._suptitle), ("footer", fig._supxlabel), ("supylabel", fig._supylabel)):
        if t is not None and t.get_visible() and t.get_text():
            out.append((name, t.get_window_extent(r), fig))
    for ax in _all_axes(fig):
        for name, t in (("title", ax.title), ("xlabel", ax.xaxis.label), ("ylabel", ax.yaxis.label)):
            if t.get_visible() and t.get_text():
                out.append((f"{name} {t.get_text()!r}", t.get_window_extent(r), ax))
        out += [(n, b, ax) for n, b in _tick_labels(ax, r)]
        out += [(f"text {t.get_text()!r}", t.get_window_extent(r), ax) for t in ax.texts
                if t.get_visible() and t.get_text()]
    return out


def _hit(a: Bbox, b: Bbox) -> bool:
    return a.x0 + PAD_PX < b.x1 and b.x0 + PAD_PX < a.x1 and a.y0 + PAD_PX < b.y1 and b.y0 + PAD_PX < a.y1


def overlaps(chart) -> list[str]:
    """Every collision on the laid-out figure: two texts on each other, a text or legend off the figure,
    a legend on a panel or on a text. Texts inside one panel may sit on its frame (they are drawn there);
    the sharding chart's bar labels are checked against its markers by its own test."""
    fig = chart.figure
    canvas = FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    r = canvas.get_renderer()
    page = Bbox.from_bounds(0, 0, fig.bbox.width, fig.bbox.height).padded(1)
    texts = text_boxes(fig, r)
    legends = [lg for lg in fig.legends] + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    problems = []
    for i, (name, box, _) in enumerate(texts):
        if not (page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1):
            problems.append(f"{name} leaves the figure")
        problems += [f"{name} on {other}" for other, b, _ in texts[i + 1:] if _hit(box, b)]
    for lg in legends:
        box = lg.get_window_extent(r)
        host = lg.axes if lg.axes is not None and not lg.axes.axison else None  # a spare grid slot's legend
        if not (page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1):
            problems.append("legend leaves the figure")
        problems += [f"legend on the panel {ax.get_title()!r}" for ax in _all_axes(fig)
                     if ax is not host and ax.axison and _hit(box, ax.get_window_extent(r))]
        problems += [f"legend on {name}" for name, b, owner in texts if owner is not host and _hit(box, b)]
    return problems


def title_lines(chart) -> int:
    t = chart.figure._suptitle
    return 0 if t is None else len(t.get_text().split("\n"))
