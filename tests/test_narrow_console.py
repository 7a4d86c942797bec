"""At 80 columns (#36 item 9): a case's progress line breaks between words, never inside a figure, and the
compare/gate table never breaks a word (rich's fold and its shrink-the-widest-column did: improve|ment,
jax/flas|h)."""

from __future__ import annotations

import numpy as np
from rich.console import Console

from tests._gate_data import case, draw, write_run
from xlabench import gate
from xlabench.cli.common import status_line
from xlabench.gate import report


def _render(renderable, width: int = 80) -> list[str]:
    con = Console(width=width, record=True, file=open("/dev/null", "w"), color_system=None)
    con.print(renderable, soft_wrap=not hasattr(renderable, "columns"))  # a progress line as run prints it
    return con.export_text().splitlines()


def test_a_progress_line_breaks_between_words_never_inside_a_figure():
    label = "jax/naive global_batch=16 sharding=fsdp mesh=data=1,fsdp=8,tensor=1"
    for extra in ("167.413 ms", "1167.413 ms"):
        lines = _render(status_line("ok", "green", 7, label, 80, extra))
        assert all(len(x) <= 80 for x in lines), lines
        assert len(lines) == 2 and lines[1].startswith(" " * 8) and lines[1].strip().endswith(extra), lines
        assert " ".join(" ".join(lines).split()) == f"ok {label} {extra}"
    # a line that fits, and no console width: as written
    assert _render(status_line("ok", "green", 7, "jax/naive b=1", 80, "1.000 ms")) == ["ok      jax/naive b=1  1.000 ms"]
    assert _render(status_line("ok", "green", 7, label * 2, None, "1.0 ms"), 200) == [f"ok      {label * 2}  1.0 ms"]


def test_the_compare_table_at_80_columns_breaks_no_word(tmp_path):
    rng = np.random.default_rng(3)
    cases = [case(i, s, head_dim=h) for i in ("naive", "flash", "xla_sdpa") for s in (128, 512) for h in (32, 64)]
    a = write_run(tmp_path / "a.csv", [(c, draw(rng, 20)) for c in cases])
    b = write_run(tmp_path / "b.csv", [(c, draw(rng, 20, (0.5, 1.4, 1.0)[i % 3])) for i, c in enumerate(cases)])
    cmp = gate.compare(gate.load_run(a), gate.load_run(b), gate.GateConfig())
    assert {gate.IMPROVEMENT, gate.REGRESSION} <= {c.verdict for c in cmp.cases}
    lines = _render(report.table(cmp, 80))
    assert all(len(x) <= 80 for x in lines), "\n".join(lines)
    words = set(" ".join(lines).split())
    for c in cmp.cases:  # compact below 120 columns (issue 50 item 12): the case's short label, on one line
        assert c.verdict in words, "\n".join(lines)
        assert sum(report.compact_label(c.label) in x for x in lines) == 1, (c.label, "\n".join(lines))
    assert not any("…" in x for x in lines)
    # a wide console: one line per case, with both sides' values, a figure beside its unit
    wide = _render(report.table(cmp, 200), 200)
    cases = [x for x in wide if "20/20" in x]
    assert len(cases) == len(cmp.cases) and all(any(c.label in x for x in cases) for c in cmp.cases)
    for c in cmp.cases:
        for v in (report.value(c.baseline, "s"), report.value(c.candidate, "s")):
            assert any(v in x for x in wide), (v, "\n".join(wide))


def test_compare_at_80_columns_is_a_line_per_measured_case_and_one_for_cases_skipped_on_both_sides(tmp_path):
    """Issue 50 item 12: two full attention-profile runs compared in 440 lines, 120 of them cases skipped on both
    sides (one line each), the measured ones wrapping onto 2 lines (here: 5) at 80 columns."""
    rng = np.random.default_rng(4)
    long = dict(num_kv_heads=1, causal=True, mode="fwd_bwd")
    measured = [case(i, s, **long) for i in ("naive", "xla_sdpa") for s in (128, 512, 1024)]
    skipped = [case(i, s, **long) for i in ("flash", "splash") for s in (128, 512, 1024, 2048)]
    entries = [(c, draw(rng, 10)) for c in measured] + [(c, None) for c in skipped]
    a = write_run(tmp_path / "a.csv", entries)
    b = write_run(tmp_path / "b.csv", [(c, None if x is None else draw(rng, 10)) for c, x in entries])
    cmp = gate.compare(gate.load_run(a), gate.load_run(b), gate.GateConfig())
    assert cmp.count(gate.SKIPPED) == len(skipped)
    lines = _render(report.table(cmp, 80))
    assert all(len(x) <= 80 for x in lines), "\n".join(lines)
    body = lines[lines.index(next(x for x in lines if x.startswith("─"))) + 1:]
    rows = [x for x in body if x.split() and x.split()[0] in gate.VERDICTS]
    assert len(rows) == len(measured), "\n".join(lines)
    assert not any(x.startswith(" " * 10) for x in body[:len(measured)]), "\n".join(lines)  # no continuation line
    assert not any("flash" in x or "splash" in x for x in lines)
    said = [x for x in report.summary_lines(cmp) if x.startswith("skipped on both sides")]
    assert len(said) == 1 and said[0].startswith(f"skipped on both sides: {len(skipped)} case(s): ")
    assert "flash" not in report.markdown(cmp).split("| verdict |", 1)[1]  # the markdown table folds them too


def test_a_warning_wraps_between_words_on_a_terminal_and_is_one_line_in_a_log(monkeypatch):
    import io

    from xlabench.cli import common

    text = ("suite gpt2 profile cpu: 3 sample(s) per case (measure.iters x measure.repeats), but `compare`/`gate` "
            "need >= 7 per side for any of its 36 case(s) to reach significance after Holm (alpha 0.05)")
    for terminal in (True, False):
        out = io.StringIO()
        monkeypatch.setattr(common, "err_console", Console(file=out, width=80, force_terminal=terminal,
                                                           color_system=None))
        common.warn(text)
        lines = out.getvalue().splitlines()
        assert " ".join(" ".join(lines).split()) == f"warning: {text}"
        assert (all(len(x) <= 80 for x in lines) and len(lines) > 1) if terminal else len(lines) == 1, lines


def test_a_piped_compare_keeps_each_case_on_one_line_beside_a_long_note(tmp_path):
    """Issue 61 item 12: piped (CI) output, 160 columns, wrapped each of 24 cases over 3 lines: one case's long
    note (a skip reason, up to 300 characters) took the room and squeezed the case column. Notes too long for
    the line go under the table by number, as shared ones do."""
    import dataclasses

    rng = np.random.default_rng(5)
    cases = [case(i, s, num_kv_heads=1, causal=c, mode=m) for i in ("naive", "xla_sdpa") for s in (128, 512, 1024)
             for c in (True, False) for m in ("fwd", "fwd_bwd")]
    a = write_run(tmp_path / "a.csv", [(c, draw(rng, 10)) for c in cases])
    b = write_run(tmp_path / "b.csv", [(c, draw(rng, 10)) for c in cases])
    cmp = gate.compare(gate.load_run(a), gate.load_run(b), gate.GateConfig())
    long = "a reason of many words " * 12
    cmp = dataclasses.replace(cmp, cases=[dataclasses.replace(cmp.cases[0], reason=long.strip())] + cmp.cases[1:])
    t = report.table(cmp, 160, log=True)  # a log: a case per line, at the table's own width
    lines = _render(t, Console(width=1000).measure(t).maximum)
    assert max(len(x) for x in lines) < 160 + 40, "\n".join(lines)  # the long note is not beside its case
    body = lines[lines.index(next(x for x in lines if x.startswith("─"))) + 1:]
    rows = [x for x in body if x.split() and x.split()[0] in gate.VERDICTS]
    assert len(rows) == len(cases) and all(any(c.label in x for x in rows) for c in cmp.cases), "\n".join(lines)
    assert not any(x.startswith(" " * 10) for x in body[:len(cases)]), "\n".join(lines)  # no continuation line
    assert "a reason of many words" in " ".join(" ".join(lines).split())  # the note is still said, under the table


def _cut_words(out: str, src: str) -> list[str]:
    """The words just before each cut ('…') of ``out`` that are no word of ``src``: cut mid-word ('.venv-t…')."""
    words = set(src.split())
    return [part.split()[-1] for part in out.split("…")[:-1] if part.split()[-1] not in words]


def test_long_reasons_are_cut_between_words(tmp_path):
    """Issue 61 item 9: run's summary ended a skip reason '(a venv at\\n.venv-t…', compare's 'skipped on both
    sides' '... is not ;', the report's markdown '...or pass --python-torch |': each is cut between words,
    with a mark that it was cut."""
    import pandas as pd

    from xlabench.report import markdown
    from xlabench.report import summary

    how = ("create it with `make torch-xla-env` (a venv at .venv-torch-xla with torch==2.9.0, torch_xla[pallas]==2.9.0 "
           "and torchax; ~4 GB download) or pass --python-torch-xla / set XLABENCH_TORCH_XLA_PYTHON to the python of "
           "an environment that has them")
    error = f"torch_xla environment missing (make torch-xla-env): /work/.venv-torch-xla/bin/python is not there: {how}"
    said = summary.SkipGroup("torch_xla environment missing (make torch-xla-env)", 72, error).line()
    assert _cut_words(said, error) == [] and said.endswith("…"), said
    md = markdown._reason(pd.Series({"error": error + " " + how}))
    assert _cut_words(md, error) == [] and md.endswith("…"), md

    rng = np.random.default_rng(6)
    cases = [case("naive", s) for s in (128, 256)]
    runs = [write_run(tmp_path / f"{x}.csv", [(cases[0], draw(rng, 10)), (cases[1], None)], error=error) for x in "ab"]
    cmp = gate.compare(gate.load_run(runs[0]), gate.load_run(runs[1]), gate.GateConfig())
    line = next(x for x in report.summary_lines(cmp) if x.startswith("skipped on both sides"))
    assert _cut_words(line, error) == [] and "…" in line, line
