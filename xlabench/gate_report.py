"""A Comparison as a terminal table, a markdown summary (CI step summary) and JSON (machines)."""

from __future__ import annotations

import json
from typing import Optional

from rich.table import Table

from xlabench import gate

_STYLE = {gate.REGRESSION: "bold red", gate.FAILED: "bold red", gate.UNCONFIRMED: "yellow",
          gate.IMPROVEMENT: "green", gate.UNCHANGED: "", gate.INCONCLUSIVE: "yellow", gate.NEW: "cyan",
          gate.MISSING: "magenta", gate.SKIPPED: "dim"}
_ICON = {gate.REGRESSION: "❌", gate.FAILED: "❌", gate.UNCONFIRMED: "⚠️", gate.IMPROVEMENT: "✅",
         gate.UNCHANGED: "", gate.INCONCLUSIVE: "❔", gate.NEW: "🆕", gate.MISSING: "➖", gate.SKIPPED: "⏭️"}


def value(v: Optional[float], unit: str) -> str:
    """A metric value with a readable unit (seconds scaled to s/ms/µs)."""
    if v is None:
        return ""
    if unit == "s":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(v) >= scale:
                return f"{v / scale:.4g} {name}"
        return f"{v / 1e-9:.4g} ns"
    return f"{v:.4g} {unit}".strip()


def ratio(c: gate.Assessment) -> str:
    if c.ratio is None:
        return ""
    return f"{c.ratio:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}]"


def _p(c: gate.Assessment) -> str:
    return "" if c.p_holm is None else f"{c.p_holm:.2g}"


def _note(c: gate.CaseVerdict) -> str:
    if c.confirmation is None:
        return c.reason
    r = c.confirmation
    return f"re-run: {ratio(r)}, p {_p(r)}: {r.verdict}" + (f" ({r.reason})" if r.verdict != gate.REGRESSION else "")


def _ordered(cmp: gate.Comparison) -> list[gate.CaseVerdict]:
    return sorted(cmp.cases, key=lambda c: gate.VERDICTS.index(c.verdict))


def headline(cmp: gate.Comparison) -> str:
    counts = ", ".join(f"{cmp.count(v)} {v}" for v in gate.VERDICTS if cmp.count(v))
    return ("PASSED" if cmp.passed else "FAILED") + f": {counts}"


def describe(cmp: gate.Comparison) -> str:
    cfg, m = cmp.config, cmp.config.metric_info
    tested = sum(c.p_holm is not None for c in cmp.cases)
    better = "higher" if m.higher_is_better else "lower"
    return (f"metric {m.name} ({better} is better; ratio = candidate / baseline of the {m.statistic}), "
            f"threshold {cfg.threshold:.0%}, alpha {cfg.alpha:g} with Holm over {tested} tested case(s), "
            f"{cfg.confidence:.0%} bootstrap interval, min {cfg.min_samples} samples")


def table(cmp: gate.Comparison) -> Table:
    unit = cmp.config.metric_info.unit
    t = Table(title=f"{cmp.baseline} -> {cmp.candidate}", caption=describe(cmp))
    for col in ("verdict", "case", "n", "baseline", "candidate", "ratio [CI]", "p (Holm)", "note"):
        t.add_column(col, overflow="fold")
    for c in _ordered(cmp):
        style = _STYLE[c.verdict]
        verdict = f"[{style}]{c.verdict}[/]" if style else c.verdict
        n = f"{c.n_base}/{c.n_cand}" if c.n_base or c.n_cand else ""
        t.add_row(verdict, c.label, n, value(c.baseline, unit), value(c.candidate, unit), ratio(c), _p(c),
                  _note(c)[:300])
    return t


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(cmp: gate.Comparison, title: str = "xlabench gate") -> str:
    unit = cmp.config.metric_info.unit
    icon = "✅" if cmp.passed else "❌"
    lines = [f"## {icon} {title}: {headline(cmp)}", "",
             f"Baseline `{cmp.baseline}` vs candidate `{cmp.candidate}`"
             + (f" (flagged cases re-run in `{cmp.confirm_run}`)" if cmp.confirm_run else "") + ".", "",
             f"_{describe(cmp)}._", ""]
    for w in cmp.warnings:
        lines += [f"> ⚠️ {_md(w)}", ""]
    lines += ["| verdict | case | n | baseline | candidate | ratio [CI] | p (Holm) | note |",
              "|---|---|---|---|---|---|---|---|"]
    for c in _ordered(cmp):
        n = f"{c.n_base}/{c.n_cand}" if c.n_base or c.n_cand else ""
        lines.append("| " + " | ".join(_md(x) for x in (
            f"{_ICON[c.verdict]} {c.verdict}".strip(), f"`{c.label}`", n, value(c.baseline, unit),
            value(c.candidate, unit), ratio(c), _p(c), _note(c)[:300])) + " |")
    return "\n".join(lines) + "\n"


def to_json(cmp: gate.Comparison) -> str:
    return json.dumps(cmp.to_dict(), indent=2) + "\n"
