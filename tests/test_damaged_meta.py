"""A damaged ``<run>.meta.json`` (issue 61 item 1): every command that reads it says so in one line, exit 2,
from one reader (results.read_meta); a truncated file, a JSON list or an ``env`` list gave tracebacks from
`report`, `explain`, `plot`, `history add` and `run --resume`. A byte-order mark is not damage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from _gate_data import case, draw, write_run
from conftest import TINY_SUITE
from xlabench import results
from xlabench.cli import main

DAMAGED = {
    "truncated": ('{"run_id": "x", "env": ', "not JSON"),
    "a list": ("[1, 2]", "a JSON array, not an object"),
    "env a list": ('{"run_id": "x", "env": [1]}', '"env" is a JSON array, not an object'),
}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    return write_run(tmp_path / "res" / "tiny" / "20260101-000000-aaaa.csv",
                     [(case("naive", seq_len=s), draw(rng, 8)) for s in (64, 128)], run_id="aaaa")


def _commands(run: Path, tmp_path: Path) -> dict[str, list[str]]:
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    return {
        "report": ["report", str(run), "--no-charts", "--out", str(tmp_path / "r.md")],
        "explain": ["explain", str(run)],
        "plot": ["plot", str(run), "--out", str(tmp_path / "plots"), "--format", "png"],
        "history add": ["history", "add", str(run), "--history", f"sqlite:///{tmp_path / 'h.sqlite'}"],
        "audit": ["audit", str(run)],
        "compare": ["compare", str(run), str(run)],
        "run --resume --dry-run": ["run", str(suite), "--resume", str(run), "--dry-run"],
        "run --resume": ["run", str(suite), "--resume", str(run)],
    }


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_every_command_says_a_damaged_meta_in_one_line_exit_2(run, tmp_path, damage):
    text, why = DAMAGED[damage]
    meta = results.RunFiles(run).meta
    meta.write_text(text)
    before = run.read_bytes(), meta.read_bytes()
    for name, args in _commands(run, tmp_path).items():
        res: Any = CliRunner().invoke(main, args)
        out = " ".join(res.output.split())
        assert res.exit_code == 2, (name, res.output, res.exception)
        assert "Traceback" not in res.output and isinstance(res.exception, SystemExit), (name, res.exception)
        assert f"{meta}: not a readable meta JSON file ({why}" in out, (name, out)
        assert (run.read_bytes(), meta.read_bytes()) == before, name  # nothing rewritten


def test_read_meta_takes_a_bom_and_a_missing_file_and_refuses_the_rest(tmp_path):
    files = results.RunFiles(tmp_path / "r.csv")
    assert results.read_meta(files) == {}  # a run copied without its meta: read without it
    files.meta.write_bytes(b"\xef\xbb\xbf" + json.dumps({"run_id": "r", "env": {"llc_bytes": 1}}).encode())
    assert results.read_meta(files.csv)["env"] == {"llc_bytes": 1}
    files.meta.write_bytes(b'{"run_id": "\xff"}')
    with pytest.raises(results.ResultsFileError, match="not UTF-8"):
        results.read_meta(files)
    for text, why in DAMAGED.values():
        files.meta.write_text(text)
        with pytest.raises(results.ResultsFileError, match=f"not a readable meta JSON file \\({why}"):
            results.read_meta(files)
