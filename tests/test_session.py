"""run.session.open_run: a new run's files, or the run a --resume continues, refused when it is another
suite's (or, for a compile, another target's)."""

from __future__ import annotations

import numpy as np
import pytest

from _gate_data import case, draw, write_run
from xlabench import suite as suite_lib
from xlabench.run import session


def _suite(tmp_path, name="tiny"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"name: {name}\nworkload: attention\nimpls: [naive]\n"
                 "params: {batch: 2, num_heads: 2, seq_len: 128, head_dim: 32, dtype: float32}\n")
    return suite_lib.load(p)


def test_new_run_files_are_under_the_suite_folder(tmp_path):
    files, done, run_id = session.open_run(_suite(tmp_path), str(tmp_path / "out"), None, suffix=".compile.csv")
    assert files.csv == tmp_path / "out" / "tiny" / f"{run_id}.compile.csv" and files.csv.parent.is_dir()
    assert done == set()


def test_resume_continues_the_run_and_refuses_another_suite_or_target(tmp_path):
    csv = write_run(tmp_path / "r.csv", [(case(), draw(np.random.default_rng(0), 5))], run_id="r1",
                    target="v4-8")
    files, done, run_id = session.open_run(_suite(tmp_path), "unused", str(csv))
    assert (files.csv, run_id, len(done)) == (csv, "r1", 1)
    files.release()  # the run's lock (a second resume while this one runs is refused: test_newcomer.py)
    with pytest.raises(session.RunInputError, match=r"holds suite 'tiny', not 'other'"):
        session.open_run(_suite(tmp_path, "other"), "unused", str(csv))
    with pytest.raises(session.RunInputError, match=r"holds target 'v4-8', not 'v5e-8'"):
        session.open_run(_suite(tmp_path), "unused", str(csv), same=("target", "v5e-8"))
    with pytest.raises(session.RunInputError, match=r"--resume: "):
        session.open_run(_suite(tmp_path), "unused", str(tmp_path / "missing.csv"))
