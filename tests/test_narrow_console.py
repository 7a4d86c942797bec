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
    for c in cmp.cases:
        assert c.verdict in words, "\n".join(lines)
        assert set(c.label.split()) <= words, (c.label, "\n".join(lines))
        for v in (report.value(c.baseline, "s"), report.value(c.candidate, "s")):
            assert any(v in x for x in lines), (v, "\n".join(lines))  # a figure beside its unit
    assert not any("…" in x for x in lines)
    # a wide console: one line per case
    wide = [x for x in _render(report.table(cmp, 200), 200) if "20/20" in x]
    assert len(wide) == len(cmp.cases) and all(any(c.label in x for x in wide) for c in cmp.cases)


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
