"""Value labels on bars that never sit on a marker or run out of the axes: each label tries places above, then inside its bar, in small steps, against the markers' drawn boxes."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.transforms import Bbox



_LABEL_PT = 8  # bar label font size
_LABEL_GAP_PT = 3  # between a label and its bar's top
_LABEL_STEP_PT = 3  # how far a label moves per try when its first places overlap a marker


def _marker_boxes(line: Line2D) -> list[Bbox]:
    """Display boxes of a line's markers, one per finite point (the marker's path, its edge included)."""
    fig = line.get_figure()
    marker = MarkerStyle(line.get_marker())
    ext = marker.get_path().transformed(marker.get_transform()).get_extents()
    scale = line.get_markersize() * fig.dpi / 72
    pad = line.get_markeredgewidth() * fig.dpi / 72 / 2
    boxes = []
    for x, y in line.get_transform().transform(line.get_xydata()):
        if np.isfinite(x) and np.isfinite(y):
            boxes.append(Bbox.from_extents(x + ext.x0 * scale - pad, y + ext.y0 * scale - pad,
                                           x + ext.x1 * scale + pad, y + ext.y1 * scale + pad))
    return boxes


def _label_places(bar_pt: float, room_pt: float) -> list[tuple[float, str, bool]]:
    """(offset from the bar's top in points, va, inside) to try, best first: inside the top of the bar,
    just above it, then further down inside and further up outside, in steps."""
    inside = [-_LABEL_GAP_PT - k * _LABEL_STEP_PT for k in range(int(bar_pt // _LABEL_STEP_PT) + 1)]
    inside = [d for d in inside if -d + _LABEL_PT * 1.4 + _LABEL_GAP_PT <= bar_pt]
    above = [_LABEL_GAP_PT + k * _LABEL_STEP_PT for k in range(int(max(room_pt, 0) // _LABEL_STEP_PT) + 1)]
    first = [(inside[0], "top", True)] if inside else []
    rest = [(d, "top", True) for d in inside[1:]]
    return first + [(d, "bottom", False) for d in above[:1]] + rest + [(d, "bottom", False) for d in above[1:]]


def _place_bar_labels(fig: Figure, panels: list[tuple[Axes, list[tuple[Any, np.ndarray]], list[Line2D]]]) -> None:
    """MFU value labels where they overlap no step-time marker, no other label and stay inside the axes.

    Runs once the figure is complete: a draw settles the constrained layout, so the positions measured
    here are the saved ones (the labels are kept out of the layout, which they therefore cannot move).
    """
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    pt = fig.dpi / 72
    for ax, drawn, markers in panels:
        frame = ax.get_window_extent(renderer)
        taken = [b for m in markers for b in _marker_boxes(m)]
        taken += [t.get_window_extent(renderer) for t in ax.texts]  # the 'skipped' / 'failed' notes
        for bars, vals in drawn:
            for rect, v in zip(bars, vals):
                if not np.isfinite(v):
                    continue
                colour = rect.get_facecolor()
                x = rect.get_x() + rect.get_width() / 2
                top = ax.transData.transform((x, v))[1]
                base = ax.transData.transform((x, 0))[1]
                ann = ax.annotate(f"{v:.1f}%", (x, v), xytext=(0, 0), textcoords="offset points", ha="center",
                                  fontsize=_LABEL_PT, annotation_clip=False)
                ann.set_in_layout(False)
                places = _label_places((top - base) / pt, (frame.y1 - top) / pt - _LABEL_PT * 1.4)
                for place in places:
                    _put_label(ann, *place, colour)
                    box = ann.get_window_extent(renderer).padded(1.5 * pt)
                    if frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1) and \
                            not any(box.overlaps(b) for b in taken):
                        break
                else:  # nowhere clear (a crowded panel): the usual place
                    _put_label(ann, *(places[0] if places else (_LABEL_GAP_PT, "bottom", False)), colour)
                taken.append(ann.get_window_extent(renderer))


def _put_label(ann: Any, dy: float, va: str, inside: bool, bar_colour: Any) -> None:
    """Inside a bar: white bold on a patch of the bar's colour (the impl's hatch does not cross it);
    above it: plain dark text."""
    ann.xyann = (0, dy)
    ann.set_va(va)
    ann.set_color("white" if inside else "black")
    ann.set_fontweight("bold" if inside else "normal")
    ann.set_bbox({"boxstyle": "square,pad=0.1", "facecolor": bar_colour, "edgecolor": "none"} if inside else None)
