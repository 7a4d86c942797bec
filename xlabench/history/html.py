"""The history as a static site a CI job can publish: an index of suites with their geometric-mean trend and
the events (many cases changed at one commit) and the table of open changes, one page per suite and environment with small multiples per case and the MFU-vs-batch
chart of its newest run. Charts are inline SVG, no script, no font or file from elsewhere: the site works
offline, from disk. Every string from a run (suite names, notes, errors, commit subjects) is escaped."""

from __future__ import annotations

import hashlib
import html
import math
import os
import shutil
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from xlabench.cells import number
from xlabench import results
from xlabench.history.series import GEOMEAN, Change, Event, Group
from xlabench.stats.summary import nanmedian

CSS = """
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.slow{color:#b00020}.fast{color:#1b7f3b}.grid{display:flex;flex-wrap:wrap;gap:8px}
.cell{border:1px solid #eee;padding:4px}.cell p{margin:0;font-size:11px;max-width:260px;overflow-wrap:anywhere}
svg text{font:10px sans-serif;fill:#555}.muted{color:#777}
"""
MAX_MULTIPLES = 400  # small multiples per page (a larger suite: the cases with changes first, then the rest)


def e(value: Any) -> str:
    """Escaped text for HTML (every string that came from a CSV, a meta file or git)."""
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src 'self' data:\">"
            f"<title>{e(title)}</title><style>{CSS}</style></head><body>\n{body}\n</body></html>\n")


def line_chart(ys: Sequence[float], width: int, height: int, marks: Sequence[int] = (), mark_labels: Sequence[str] = (),
               title: str = "", css_class: str = "trend", percent: bool = True) -> str:
    """An SVG line chart of ys (log values: shown as % from the first run's level when percent), with a
    vertical mark before each index in marks."""
    pad_l, pad_r, pad_t, pad_b = 38, 6, 14 if title else 6, 14
    ys = np.asarray(ys, dtype=float)
    n = len(ys)
    ok = np.isfinite(ys)
    if not ok.any():
        return f'<svg class="{css_class}" width="{width}" height="{height}"></svg>'
    vals = (np.exp(ys - nanmedian(ys)) - 1) * 100 if percent else ys
    lo, hi = float(np.nanmin(vals)), float(np.nanmax(vals))
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def x(i: float) -> float:
        return pad_l + (w * i / max(n - 1, 1))

    def y(v: float) -> float:
        return pad_t + h * (1 - (v - lo) / (hi - lo))

    pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(vals) if math.isfinite(v))
    parts = [f'<svg class="{css_class}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>{e(title)}</title>']
    if title:
        parts.append(f'<text x="{pad_l}" y="10">{e(title)}</text>')
    for v in (lo, hi):
        parts.append(f'<text x="2" y="{y(v) + 3:.1f}">{v:+.1f}{"%" if percent else ""}</text>')
    parts.append(f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" stroke="#ccc"/>')
    for k, label in zip(marks, list(mark_labels) + [""] * len(marks)):
        xm = x(k - 0.5)
        parts.append(f'<line class="change" x1="{xm:.1f}" y1="{pad_t}" x2="{xm:.1f}" y2="{pad_t + h}" '
                     'stroke="#b00020" stroke-dasharray="3,2"/>')
        if label:
            parts.append(f'<text x="{xm + 2:.1f}" y="{pad_t + 9}" style="fill:#b00020">{e(label)}</text>')
    parts.append(f'<polyline points="{pts}" fill="none" stroke="#1f5fa8" stroke-width="1.5"/>')
    if n <= 80:
        parts += [f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="1.8" fill="#1f5fa8"/>'
                  for i, v in enumerate(vals) if math.isfinite(v)]
    parts.append(f'<text x="{pad_l}" y="{height - 2}">run 1</text>'
                 + (f'<text x="{pad_l + w - 40}" y="{height - 2}">run {n}</text>' if n > 1 else "") + "</svg>")
    return "".join(parts)


def scatter_chart(series: dict[str, list[tuple[float, float]]], width: int = 560, height: int = 300,
                  title: str = "", x_label: str = "batch", y_label: str = "MFU") -> str:
    """An SVG chart of y against x (log2 x axis) per named series: the newest run's MFU against batch."""
    colors = ["#1f5fa8", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d"]
    pts = [p for s in series.values() for p in s]
    if not pts:
        return ""
    xs = [math.log2(p[0]) for p in pts]
    ys = [p[1] for p in pts]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y1 = max(ys) * 1.1 if max(ys) > 0 else 1
    pad_l, pad_b, pad_t, legend = 44, 18, 16, 150
    w, h = width - pad_l - legend, height - pad_t - pad_b
    out = [f'<svg class="mfu" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img"><title>{e(title)}</title><text x="{pad_l}" y="11">{e(title)}</text>',
           f'<text x="2" y="{pad_t + 4}">{y1:.3g}</text><text x="2" y="{pad_t + h}">0</text>']
    for i, (name, s) in enumerate(sorted(series.items())):
        c = colors[i % len(colors)]
        s = sorted(s)
        coords = [(pad_l + w * (math.log2(a) - x0) / (x1 - x0), pad_t + h * (1 - b / y1)) for a, b in s]
        out.append(f'<polyline points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in coords)}" fill="none" stroke="{c}"/>')
        out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{c}"/>' for a, b in coords]
        out.append(f'<text x="{width - legend + 6}" y="{pad_t + 12 * i + 8}" style="fill:{c}">{e(name)}</text>')
    for a in sorted({p[0] for p in pts}):
        out.append(f'<text x="{pad_l + w * (math.log2(a) - x0) / (x1 - x0) - 6:.1f}" y="{height - 3}">{e(f"{a:g}")}</text>')
    out.append(f'<text x="{pad_l + w - 60}" y="{height - 3}">{e(x_label)}</text>'
               f'<text x="2" y="{pad_t + h // 2}">{e(y_label)}</text></svg>')
    return "".join(out)


def _fmt_change(c: Change) -> str:
    cls = "slow" if c.ratio > 1 else "fast"
    return (f'<span class="{cls}">{(c.ratio - 1) * 100:+.1f}%</span> '
            f'<span class="muted">({(c.low - 1) * 100:+.1f}% to {(c.high - 1) * 100:+.1f}%)</span>')


def changes_table(changes: Sequence[Change], link: Optional[dict[str, str]] = None) -> str:
    if not changes:
        return "<p>No open changes.</p>"
    rows = ["<table class=\"changes\"><tr><th>suite</th><th>case</th><th>last good</th><th>first bad</th>"
            "<th>change (95% interval)</th><th>p (Holm)</th></tr>"]
    for c in changes:
        suite = e(c.suite)
        if link and (c.suite, c.profile, c.device_kind, c.framework_version) in link:
            suite = f'<a href="{e(link[(c.suite, c.profile, c.device_kind, c.framework_version)])}">{suite}</a>'
        rows.append(f"<tr><td>{suite}<br><span class=\"muted\">{e(c.device_kind)}; {e(c.framework_version)}</span></td>"
                    f"<td>{e(c.case)}</td><td><code>{e(c.last_good)}</code></td><td><code>{e(c.first_bad)}</code></td>"
                    f"<td>{_fmt_change(c)}</td><td>{c.p_holm:.2g}</td></tr>")
    rows.append("</table>")
    return "".join(rows)


def events_table(events: Sequence[Event], link: Optional[dict[str, str]] = None) -> str:
    """Many cases changed at one commit: a row per event (the commit, how many cases, the median change and
    the range over the cases), its cases beneath it."""
    if not events:
        return "<p>No commit moved several cases at once.</p>"
    rows = ["<table class=\"events\"><tr><th>suite</th><th>last good</th><th>first bad</th><th>cases</th>"
            "<th>change (median; range over the cases)</th></tr>"]
    for ev in events:
        key = (ev.suite, ev.profile, ev.device_kind, ev.framework_version)
        suite = f'<a href="{e(link[key])}">{e(ev.suite)}</a>' if link and key in link else e(ev.suite)
        cls = "slow" if ev.ratio > 1 else "fast"
        cases = "".join(f"<li>{e(c.case)} {_fmt_change(c)}</li>" for c in ev.changes)
        rows.append(f"<tr><td>{suite}</td><td><code>{e(ev.last_good)}</code></td><td><code>{e(ev.first_bad)}</code></td>"
                    f"<td>{ev.cases} of {ev.of} ({ev.slower} slower)<details><summary>the cases</summary><ul>{cases}"
                    f"</ul></details></td><td><span class=\"{cls}\">{(ev.ratio - 1) * 100:+.1f}%</span> <span class=\"muted\">"
                    f"({(ev.low - 1) * 100:+.1f}% to {(ev.high - 1) * 100:+.1f}%)</span></td></tr>")
    rows.append("</table>")
    return "".join(rows)


def _slug(g: Group) -> str:
    key = f"{g.env.suite}|{g.env.profile}|{g.env.device_kind}|{g.env.framework_version}"
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in g.env.suite)[:40]
    return f"{safe}-{hashlib.sha1(key.encode()).hexdigest()[:8]}.html"


def _marks(g: Group, idx: np.ndarray, changes: Sequence[Change]) -> tuple[list[int], list[str]]:
    where = {int(r): i for i, r in enumerate(idx)}
    ks = [(where[c.position], (c.first_bad or c.first_bad_run)[:10]) for c in changes if c.position in where]
    return [k for k, _ in ks], [lab for _, lab in ks]


def _number(v: Any) -> Optional[float]:
    f = number(v)
    return f if f is not None and f > 0 else None


def _newest_run_section(g: Group, newest: dict[str, Any], metrics: dict[str, dict[str, Any]], out: Path) -> str:
    """The newest run: its MFU against batch (per impl), its notes and errors, links to its files."""
    by_impl: dict[str, list[tuple[float, float]]] = {}
    for cid, m in metrics.items():
        info = g.cases.get(cid) or {}
        batch = (info.get("params") or {}).get("batch") or (info.get("params") or {}).get("global_batch")
        mfu = _number(m.get("mfu"))
        if m.get("status") == "ok" and mfu is not None and _number(batch):
            by_impl.setdefault(f"{info.get('impl', '?')} {(info.get('params') or {}).get('mode', '')}".strip(), []
                               ).append((float(batch), mfu))
    best: dict[str, dict[float, float]] = {}
    for name, pts in by_impl.items():  # several shapes per batch: the best MFU of each
        for b, v in pts:
            best.setdefault(name, {})[b] = max(v, best.get(name, {}).get(b, 0.0))
    chart = scatter_chart({k: sorted(v.items()) for k, v in best.items()}, title="MFU vs batch (best shape per batch)")
    links = []
    src = Path(newest.get("source") or "")
    if src.exists():
        dest = out / "runs"
        dest.mkdir(exist_ok=True)
        for p in (src, results.RunFiles(src).samples, results.RunFiles(src).meta):
            if p.exists():
                shutil.copyfile(p, dest / p.name)
                links.append(f'<a href="runs/{e(p.name)}">{e(p.name)}</a>')
    for case_id, paths in sorted((newest.get("meta") or {}).get("traces", {}).items()):
        for t in paths:
            rel = os.path.relpath(Path(t).resolve(), out.resolve()) if Path(t).exists() else t
            links.append(f'<a href="{e(rel)}">trace {e(case_id)}</a>')
    notes = [(cid, m.get("notes"), m.get("error")) for cid, m in sorted(metrics.items()) if m.get("notes") or m.get("error")]
    note_rows = "".join(f"<tr><td>{e(g.label(c))}</td><td>{e(n)}</td><td>{e(err)}</td></tr>"
                        for c, n, err in notes[:200])
    return (f"<h2>Newest run: <code>{e(newest['run_id'])}</code> at <code>{e(newest.get('git_sha'))}</code> "
            f"{e(newest.get('commit_message') or '')}</h2>"
            f"{chart or '<p>No MFU figures in this run.</p>'}<p>Files: {' | '.join(links) or 'not available'}</p>"
            + (f"<table class=\"notes\"><tr><th>case</th><th>notes</th><th>error</th></tr>{note_rows}</table>"
               if note_rows else ""))


def write_site(store: Any, groups: Sequence[Group], changes: dict[int, list[Change]], out: Path,
               events: Optional[dict[int, list[Event]]] = None) -> Path:
    """Write index.html and one page per group under out; returns the index's path."""
    events = events or {}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    links = {(g.env.suite, g.env.profile, g.env.device_kind, g.env.framework_version): _slug(g) for g in groups}
    cards, every_change, every_event = [], [], []
    for gi, g in enumerate(groups):
        ch = changes.get(gi, [])
        every_change += ch
        every_event += events.get(gi, [])
        idx, y = g.geomean_series()
        suite_ch = [c for c in ch if c.case_id == GEOMEAN]
        marks, labels = _marks(g, idx, suite_ch)
        trend = line_chart(y, 760, 220, marks, labels, title="suite geometric mean of median_s (% from its median)")
        page = [f"<p><a href=\"index.html\">all suites</a></p><h1>{e(g.env.suite)}</h1>"
                f"<p>profile {e(g.env.profile or 'base')}; {e(g.env.device_kind)}; {e(g.env.framework_version)}; "
                f"{len(g.runs)} runs in {'git topological' if g.ordered_by == 'git' else 'start-time'} order, "
                f"{e(g.runs[0].get('git_sha'))} .. {e(g.runs[-1].get('git_sha'))}</p>", trend,
                "<h2>Events: many cases at one commit</h2>", events_table(events.get(gi, [])),
                "<h2>Open changes</h2>", changes_table(ch)]
        by_case: dict[str, list[Change]] = {}
        for c in ch:
            by_case.setdefault(c.case_id, []).append(c)
        ids = sorted(g.samples, key=lambda c: (c not in by_case, g.label(c)))
        cells = []
        for cid in ids[:MAX_MULTIPLES]:
            idx_c, y_c = g.case_series(cid)
            full = np.full(len(g.runs), np.nan)
            full[idx_c] = y_c
            m, lab = _marks(g, np.arange(len(g.runs)), by_case.get(cid, []))
            cells.append(f'<div class="cell">{line_chart(full, 260, 90, m, lab, css_class="multiple")}'
                         f"<p>{e(g.label(cid))} <span class=\"muted\">{e(cid)}</span></p></div>")
        page.append(f"<h2>Cases ({len(ids)})</h2><div class=\"grid\">{''.join(cells)}</div>")
        if len(ids) > MAX_MULTIPLES:
            page.append(f"<p>{len(ids) - MAX_MULTIPLES} more cases not drawn.</p>")
        newest = g.runs[-1]
        page.append(_newest_run_section(g, newest, store.metrics(newest["run_id"]), out))
        (out / _slug(g)).write_text(_page(f"{g.env.suite} history", "".join(page)), encoding="utf-8")
        small = line_chart(y, 360, 110, marks, labels, css_class="trend")
        cards.append(f"<tr><td><a href=\"{e(_slug(g))}\">{e(g.env.suite)}</a><br><span class=\"muted\">"
                     f"{e(g.env.profile or 'base')}; {e(g.env.device_kind)}; {e(g.env.framework_version)}</span></td>"
                     f"<td>{len(g.runs)}</td><td>{len(g.samples)}</td><td>{len(ch)}</td><td>{small}</td></tr>")
    body = ("<h1>xlabench history</h1><table class=\"suites\"><tr><th>suite</th><th>runs</th><th>cases</th>"
            f"<th>changes</th><th>geometric-mean trend</th></tr>{''.join(cards)}</table>"
            f"<h2>Events: many cases at one commit</h2>{events_table(every_event, links)}"
            f"<h2>Open changes</h2>{changes_table(every_change, links)}")
    index = out / "index.html"
    index.write_text(_page("xlabench history", body), encoding="utf-8")
    return index
