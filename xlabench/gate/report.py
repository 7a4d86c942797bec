"""A Comparison as a terminal table, a markdown summary (CI step summary) and JSON (machines)."""

from __future__ import annotations

from collections import Counter

import json
from typing import Optional

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from xlabench import gate
from xlabench.cells import clip
from xlabench.units import MICROSECOND, MILLISECOND, NANOSECOND

_STYLE = {gate.REGRESSION: "bold red", gate.FAILED: "bold red", gate.UNDERPOWERED: "bold yellow",
          gate.CONFOUNDED: "bold yellow", gate.UNCONFIRMED: "yellow", gate.IMPROVEMENT: "green", gate.UNCHANGED: "",
          gate.INCONCLUSIVE: "yellow", gate.NEW: "cyan", gate.MISSING: "magenta", gate.SKIPPED: "dim"}
_ICON = {gate.REGRESSION: "❌", gate.FAILED: "❌", gate.UNDERPOWERED: "❓", gate.CONFOUNDED: "❓",
         gate.UNCONFIRMED: "⚠️", gate.IMPROVEMENT: "✅", gate.UNCHANGED: "", gate.INCONCLUSIVE: "❔",
         gate.NEW: "🆕", gate.MISSING: "➖", gate.SKIPPED: "⏭️"}
_OUTCOME = {gate.EXIT_PASS: "PASSED", gate.EXIT_FAIL: "FAILED", gate.EXIT_NOTHING: "NOTHING COMPARED",
            gate.EXIT_UNJUDGED: "COULD NOT JUDGE"}
_OUTCOME_ICON = {gate.EXIT_PASS: "✅", gate.EXIT_FAIL: "❌", gate.EXIT_NOTHING: "❓", gate.EXIT_UNJUDGED: "❓"}


def value(v: Optional[float], unit: str) -> str:
    """A metric value with a readable unit (seconds scaled to s/ms/µs)."""
    if v is None:
        return ""
    if unit == "s":
        for scale, name in ((1.0, "s"), (MILLISECOND, "ms"), (MICROSECOND, "µs")):
            if abs(v) >= scale:
                return f"{v / scale:.4g} {name}"
        return f"{v / NANOSECOND:.4g} ns"
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
    suite = f"; suite-wide {cmp.suite.verdict}" if cmp.suite is not None else ""
    allowed = " (could not judge: allowed by --allow-inconclusive)" if (
        cmp.exit_code == gate.EXIT_PASS and cmp.unjudged_failing) else ""
    if cmp.missing and cmp.config.allow_missing and cmp.exit_code != gate.EXIT_NOTHING:
        allowed += " (missing cases allowed by --allow-missing)"
    nothing = f" ({_why_nothing(cmp)})" if cmp.exit_code == gate.EXIT_NOTHING else ""
    return f"{_OUTCOME[cmp.exit_code]}: {counts or 'no cases'}{suite}{allowed}{nothing}"


def _span(values: list[int]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def _why_nothing(cmp: gate.Comparison) -> str:
    """Why no case reached the test: too few samples (how many each side has, how many it needs, how to
    get them), else no case with an ok measurement on both sides."""
    short = cmp.short
    if not short:
        return "no case has an ok measurement on both sides: nothing was compared"
    need = cmp.need_per_side
    return (f"{len(short)} case(s) are ok on both sides but have too few samples: "
            f"{_span([c.n_base for c in short])} baseline, {_span([c.n_cand for c in short])} candidate per case; "
            f"the test needs >= {need} per side (min_samples {cmp.config.min_samples}, and {need} to reach "
            f"significance after Holm over {cmp.compared} case(s)): run both sides with measure.iters x "
            f"measure.repeats >= {need} (the suite's measure.iters, or xlabench run --repeats)")


def suite_line(cmp: gate.Comparison) -> Optional[str]:
    """'suite: 48/48 slower, geometric mean 1.30 [1.27, 1.33], p = 3.6e-15 (...): regression (...)'."""
    s = cmp.suite
    if s is None:
        return None
    worse, better = ("slower", "faster") if not cmp.config.metric_info.higher_is_better else ("worse", "better")
    host = "" if s.machine_ratio is None else (
        f"; compile times {s.machine_ratio:.2f} [{s.machine_low:.2f}, {s.machine_high:.2f}]")
    if s.calib_ratio is not None:  # said here only: HostProbe warns only where there is no suite line
        t = cmp.config.threshold
        moved = "" if 1 - t < s.calib_ratio < 1 + t else (
            f", beyond the {t:.0%} threshold: the host's speed changed (load?); changes it explains are 'confounded'")
        host += f"; host calibration {s.calib_ratio:.2f} (candidate / baseline{moved})"
    line = (f"suite: {s.n_worse}/{s.n_cases} {worse}, {s.n_better}/{s.n_cases} {better}, geometric mean "
            f"{s.ratio:.2f} [{s.ci_low:.2f}, {s.ci_high:.2f}], p = {s.p_value:.2g} (Wilcoxon signed-rank over "
            f"{s.n_cases} cases){host}: {s.verdict} ({s.reason})")
    if s.confirmation is not None:
        r = s.confirmation
        line += f"; re-run: geometric mean {r.ratio:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}], p = {r.p_value:.2g}"
        if r.calib_ratio is not None:
            line += f", host calibration {r.calib_ratio:.2f} (re-run / baseline)"
    return line


def unjudged_line(cmp: gate.Comparison) -> Optional[str]:
    """'could not judge N cases: too few samples; need >= K per side: ...' (None when every case was judged)."""
    cases = cmp.unjudged
    if not cases:
        return None
    need = cmp.need_per_side
    split = [c for c in cases if c.verdict == gate.INCONCLUSIVE and c.p_holm is not None
             and min(c.n_base or 0, c.n_cand or 0) >= need]  # samples enough: the test and the interval disagree
    few = [c for c in cases if (c.n_base or c.n_cand) and not any(c is k for k in split)]
    have = sorted({f"{c.n_base}/{c.n_cand}" for c in few})
    under = [c for c in cases if c.verdict == gate.UNDERPOWERED]
    parts = []
    if len(split) < len(cases):
        parts.append(f"too few samples; need >= {need} per side over {max(1, cmp.compared)} case(s)"
                     + (f" (have {', '.join(have[:4])})" if have else ""))
    if split:
        parts.append((f"{len(split)} of them " if parts else "") + "not significant after Holm although the "
                     f"interval lies wholly beyond the {cmp.config.threshold:.0%} threshold: "
                     + ", ".join(c.label for c in split[:8]) + (" ..." if len(split) > 8 else ""))
    line = f"could not judge {len(cases)} case(s): " + "; ".join(parts)
    if under:
        line += (f"; {len(under)} of them underpowered (interval wholly beyond the threshold, the bad way): "
                 + ", ".join(c.label for c in under[:8]) + (" ..." if len(under) > 8 else ""))
    other = [c for c in cases if c.verdict == gate.INCONCLUSIVE and not (c.n_base or c.n_cand)]
    if other:
        line += "; " + "; ".join(f"{c.label}: {c.reason}" for c in other[:4])
    return line


def missing_line(cmp: gate.Comparison) -> Optional[str]:
    """'missing from the candidate: 90 of the baseline's 96 case(s): ...' (None when none is missing)."""
    cases = cmp.missing
    if not cases:
        return None
    how = "allowed by --allow-missing" if cmp.config.allow_missing else "they fail the comparison; --allow-missing allows them"
    return (f"missing from the candidate: {len(cases)} of the baseline's {cmp.n_baseline} case(s) ({how}): "
            + ", ".join(c.label for c in cases[:8]) + (f" ... and {len(cases) - 8} more" if len(cases) > 8 else ""))


def describe(cmp: gate.Comparison) -> str:
    cfg, m = cmp.config, cmp.config.metric_info
    better = "higher" if m.higher_is_better else "lower"
    return (f"metric {m.name} ({better} is better; ratio = candidate / baseline of the {m.statistic}), "
            f"threshold {cfg.threshold:.0%}, alpha {cfg.alpha:g} with Holm over {_holm_family(cmp)} "
            f"(>= {cmp.need_per_side} samples per side can reach it), {cfg.confidence:.0%} bootstrap interval, "
            f"min {cfg.min_samples} samples")


def _holm_family(cmp: gate.Comparison) -> str:
    """'12 tested case(s)'; '12 case(s), none tested'; '4 tested case(s) of 12' (the rest too few samples)."""
    if cmp.tested == cmp.compared:
        return f"{cmp.tested} tested case(s)"
    return f"{cmp.compared} case(s), none tested" if not cmp.tested else f"{cmp.tested} tested case(s) of {cmp.compared}"


def both_skipped(c: gate.CaseVerdict) -> bool:
    """A case skipped in the candidate and in the baseline: nothing to say about it but why (one line for all)."""
    return c.verdict == gate.SKIPPED and c.reason.endswith("(baseline: skipped)")


def skipped_line(cmp: gate.Comparison) -> Optional[str]:
    """'skipped on both sides: 120 case(s): 80 flash ... needs ...; 40 ...' (None when there is none): the
    120 lines of a full attention profile's compare, one line (issue 50 item 12)."""
    cases = [c for c in cmp.cases if both_skipped(c)]
    if not cases:
        return None
    why = Counter(c.reason[: -len(" (baseline: skipped)")] for c in cases)
    return (f"skipped on both sides: {len(cases)} case(s): "
            + "; ".join(f"{n} x {clip(r, 120)}" for r, n in why.most_common(3))
            + (f"; {len(why) - 3} other reason(s) (--json lists every case)" if len(why) > 3 else ""))


def summary_lines(cmp: gate.Comparison) -> list[str]:
    """The suite-wide line, the missing line, the could-not-judge line and the skipped-on-both-sides line,
    where there are any."""
    return [x for x in (suite_line(cmp), missing_line(cmp), unjudged_line(cmp), skipped_line(cmp)) if x]


# At fewer columns than this the terminal table is compact: one line per case at 80 columns (issue 50 item 12).
COMPACT_BELOW = 120
_SHORT_KEYS = (("num_kv_heads=", "kvh="), ("num_heads=", "h="), ("kv_seq_len=", "kv="), ("seq_len=", "s="),
               ("head_dim=", "d="), ("batch=", "b="), ("global_batch=", "gb="), ("dtype=", ""), ("mode=", ""),
               ("causal=True", "causal"))


def compact_label(label: str) -> str:
    """'jax/naive batch=4 seq_len=128 kv_seq_len=128 causal=True mode=fwd' -> 'jax/naive b=4 s=128 causal fwd':
    short keys, kv_seq_len only where it differs from seq_len, causal=False left out."""
    words = label.split()
    kv = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words if "=" in w}
    out = []
    for w in words:
        if w == "causal=False" or (w.startswith("kv_seq_len=") and kv.get("kv_seq_len") == kv.get("seq_len")):
            continue
        for long, short in _SHORT_KEYS:
            if w.startswith(long):
                w = short + w[len(long):]
                break
        out.append(w)
    return " ".join(out)


def _compact_ratio(c: gate.Assessment) -> str:
    return "" if c.ratio is None else f"{c.ratio:.2f} [{c.ci_low:.2f},{c.ci_high:.2f}]"


def _fit(t: Table, cells: list[list[str]], width: Optional[int], least: Optional[dict[int, int]] = None) -> None:
    """Column widths for a ``width``-column console that break lines only between words: each column at
    least its longest word, the room left shared by what each needs beyond that (rich would shrink the
    widest column first, below its longest word); ``least``: a column's own least width (a figure with its
    unit). Nothing is set where the table fits as it is."""
    if width is None:
        return
    cols = [[c.header] + [row[i] for row in cells] for i, c in enumerate(t.columns)]
    lo = [max([cell_len(w) for s in col for w in str(s).split()] + [(least or {}).get(i, 1)])
          for i, col in enumerate(cols)]
    hi = [max((cell_len(line) for s in col for line in str(s).splitlines()), default=1) for col in cols]
    room = width - 2 * len(cols) + 1  # a padding column right of each, a rule between them
    if sum(hi) <= room or sum(lo) > room:
        return
    need = [h - m for h, m in zip(hi, lo)]
    spare = room - sum(lo)
    share = [spare * n // sum(need) for n in need]
    for i, (m, s) in enumerate(zip(lo, share)):
        t.columns[i].width = m + s
    t.columns[-1].width += room - sum(c.width or 0 for c in t.columns)


def table(cmp: gate.Comparison, width: Optional[int] = None, log: bool = False) -> Table:
    """The cases as a table (those skipped on both sides: skipped_line); on a ``width``-column console it
    breaks lines only between words: no vertical rules, the two sides' values in one column, each column as
    wide as its longest word. Below COMPACT_BELOW columns: compact (one line per case at 80). ``log`` (piped
    output, a CI log): a case per line, however wide (print it at its own width), the notes that would not
    fit ``width`` beside their cases under it by number."""
    if width is not None and width < COMPACT_BELOW:
        return _compact_table(cmp, width)
    unit = cmp.config.metric_info.unit
    cases = [c for c in _ordered(cmp) if not both_skipped(c)]
    notes = [clip(_note(c), 300) for c in cases]
    # a note several cases share (too few samples: every case) is written once, under the table, by number;
    # every note is where the notes beside their cases would not leave each case its line (a 300-character
    # skip reason squeezed the case column: 3 lines a case in a 160-column log)
    counts = Counter(notes)
    sides = [(value(c.baseline, unit), value(c.candidate, unit)) for c in cases]

    def rows(shared: dict[str, int]) -> list[list[str]]:
        return [[c.verdict, c.label, f"{c.n_base}/{c.n_cand}" if c.n_base or c.n_cand else "",
                 " → ".join(v for v in two if v), ratio(c), _p(c), f"note {shared[n]}" if n in shared else n]
                for c, two, n in zip(cases, sides, notes)]

    shared = {n: i for i, n in enumerate((n for n in counts if n and counts[n] > 1), 1)}
    cells = rows(shared)
    if width is not None and sum(max([cell_len(r[i]) for r in cells] + [1]) + 2 for i in range(7)) > width:
        shared = {n: i for i, n in enumerate((n for n in counts if n), 1)}  # a long note no longer crowds its case
        cells = rows(shared)
    caption = "\n".join([describe(cmp)] + [f"note {i}: {n}" for n, i in shared.items()])
    t = Table(title=f"{cmp.baseline} -> {cmp.candidate}", caption=caption, box=box.SIMPLE_HEAD,
              show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for col in ("verdict", "case", "n", "baseline → candidate", "ratio [CI]", "p (Holm)", "note"):
        t.add_column(col, no_wrap=col in ("verdict", "n"))
    # "1.003 ms →" over "1.377 ms": a value never parted from its unit
    _fit(t, cells, None if log else width, {3: max([max(len(b) + 2, len(c)) for b, c in sides] + [1])})
    for c, row in zip(cases, cells):
        t.add_row(Text(row[0], style=_STYLE[c.verdict] or ""), *row[1:])  # no markup: the CLI prints with markup off
    return t


def _compact_table(cmp: gate.Comparison, width: int) -> Table:
    """verdict, the case's compact label, the ratio and its interval, and a note's number (the notes, n and
    p under the table, each note once): a case per line at 80 columns, where 7 columns took 2 to 5 lines."""
    cases = [c for c in _ordered(cmp) if not both_skipped(c)]
    notes = [clip(_note(c), 300) for c in cases]
    numbered = {n: i for i, n in enumerate(dict.fromkeys(n for n in notes if n), 1)}
    caption = "\n".join([describe(cmp), f"compact below {COMPACT_BELOW} columns: baseline and candidate values, n and "
                          "p (Holm) in --markdown / --json or on a wider console"]
                         + [f"#{i}: {n}" for n, i in numbered.items()])
    t = Table(title=f"{cmp.baseline} -> {cmp.candidate}", caption=caption, box=box.SIMPLE_HEAD,
              show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for col in ("verdict", "case", "ratio [CI]", "#"):  # '#': the note's number
        t.add_column(col, no_wrap=col != "case")
    cells = [[c.verdict, compact_label(c.label), _compact_ratio(c), str(numbered[n]) if n else ""]
             for c, n in zip(cases, notes)]
    _fit(t, cells, width, {i: max([cell_len(r[i]) for r in cells] + [1]) for i in (0, 2, 3)})  # only the case wraps
    for c, row in zip(cases, cells):
        t.add_row(Text(row[0], style=_STYLE[c.verdict] or ""), *row[1:])
    return t


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(cmp: gate.Comparison, title: str = "xlabench gate") -> str:
    unit = cmp.config.metric_info.unit
    icon = _OUTCOME_ICON[cmp.exit_code]
    lines = [f"## {icon} {title}: {headline(cmp)}", "",
             f"Baseline `{cmp.baseline}` vs candidate `{cmp.candidate}`"
             + (f" (flagged cases re-run in `{cmp.confirm_run}`)" if cmp.confirm_run else "") + ".", "",
             f"_{describe(cmp)}._", ""]
    for x in summary_lines(cmp):
        lines += [f"**{_md(x)}**", ""]
    for w in cmp.warnings:
        lines += [f"> ⚠️ {_md(w)}", ""]
    lines += ["| verdict | case | n | baseline | candidate | ratio [CI] | p (Holm) | note |",
              "|---|---|---|---|---|---|---|---|"]
    for c in (c for c in _ordered(cmp) if not both_skipped(c)):
        n = f"{c.n_base}/{c.n_cand}" if c.n_base or c.n_cand else ""
        lines.append("| " + " | ".join(_md(x) for x in (
            f"{_ICON[c.verdict]} {c.verdict}".strip(), f"`{c.label}`", n, value(c.baseline, unit),
            value(c.candidate, unit), ratio(c), _p(c), clip(_note(c), 300))) + " |")
    return "\n".join(lines) + "\n"


def to_json(cmp: gate.Comparison) -> str:
    return json.dumps(cmp.to_dict(), indent=2) + "\n"
