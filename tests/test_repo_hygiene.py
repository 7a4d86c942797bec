"""The checkout stays clean: no conflict markers in tracked files, and the main job writes only where git
ignores (so a row's git_sha never turns +dirty because `make run` rewrote a tracked chart)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
MARKERS = ("<<<<<<< ", ">>>>>>> ", "||||||| ")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.fail("tests need a git checkout (CI runs in a clone)")
    return [p for p in _git("ls-files").splitlines() if (ROOT / p).is_file()]


def conflict_lines(text: str) -> list[int]:
    """1-based numbers of lines that open, split or close a merge conflict."""
    lines = text.splitlines()
    out = [i + 1 for i, line in enumerate(lines) if line.startswith(MARKERS)]
    if out:  # a lone ======= only counts between an opening and a closing marker
        out += [i + 1 for i, line in enumerate(lines) if line.rstrip() == "=======" and out[0] < i + 1]
    return sorted(out)


def test_conflict_marker_finder_finds_a_real_conflict():
    text = "a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> fit\nd\n"
    assert conflict_lines(text) == [2, 4, 6]
    assert conflict_lines("Title\n=======\n") == []  # a setext heading is not a conflict


def test_no_tracked_file_holds_conflict_markers(tracked):
    found = {}
    for path in tracked:
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary (PNG)
        if hits := conflict_lines(text):
            found[path] = hits
    assert found == {}, f"unresolved merge conflicts (file: lines): {found}"


def test_make_run_outputs_are_ignored_by_git(tracked):
    """`make run` = `xlabench run SUITE` (results/<suite>/) then `xlabench plot` (plots/<suite>/)."""
    outputs = ["results/gpt2/run.csv", "results/gpt2/run.samples.csv", "plots/gpt2/mfu_batch.png",
               "plots/gpt2/sharding.png", "plots/attention/speedup.svg", "plots/paged_attention/paged.png"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *outputs], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    assert sorted(ignored) == sorted(outputs)
    assert [p for p in tracked if p.startswith(("plots/", "results/"))] == ["plots/README.md", "results/README.md"]


def test_readme_charts_exist_where_the_readme_points():
    readme = (ROOT / "README.md").read_text()
    for rel in ("docs/img/gpt2/mfu_batch.png", "docs/img/gpt2/sharding.png", "docs/img/gpt2/fit-v4-8.png"):
        assert f"]({rel})" in readme
        assert (ROOT / rel).stat().st_size > 10_000


def test_readme_mfu_table_is_regenerated_between_its_markers():
    from benchmarks import readme_charts

    df = pd.DataFrame({"status": ["ok", "ok", "failed", "ok"], "backend": ["jax", "jax", "jax", "torch_xla"],
                       "sharding": ["fsdp", "2d", "fsdp", "fsdp"], "impl": ["naive", "naive", "flash", "naive"],
                       "global_batch": [8, 8, 8, 8], "mfu": [0.2111, 0.5, None, 0.9]})
    table = readme_charts.mfu_table(df)
    assert table.splitlines() == ["| global batch | 2d naive | fsdp naive |", "|---|---|---|", "| 8 | 50.0 | 21.1 |"]
    text = f"intro\n{readme_charts.START}\nold\n{readme_charts.END}\nrest\n"
    assert readme_charts.replace_block(text, table) == f"intro\n{readme_charts.START}\n{table}\n{readme_charts.END}\nrest\n"
    with pytest.raises(SystemExit):
        readme_charts.replace_block("no markers", table)
    readme = (ROOT / "README.md").read_text()
    assert readme.count(readme_charts.START) == 1 and readme.count(readme_charts.END) == 1


def test_the_default_history_store_is_ignored_by_git():
    """`history add` (and run/gate --history) with no URL write the default sqlite store (and its
    journal) into the checkout: it must not show as untracked."""
    from xlabench.history.store import DEFAULT_URL

    db = DEFAULT_URL.removeprefix("sqlite:///")
    outputs = [db, f"{db}-journal", f"{db}-wal"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *outputs], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    assert sorted(ignored) == sorted(outputs)


# Words about how the work was organised, not about the machine or the commands: an issue's number, the tool
# that reached the machine and its budget, the sessions and their calls of it, who handed the files over.
_ORGANISED = (r"\bissues?\s*(?:#\s*)?\d", r"(?<![\w&])#\d+\b", r"\bdevice[ -]tool\b", r"device-seconds?\b",
              r"\bCEO\b", r"\bshared folder\b", r"\bhanded over\b", r"\bcalls? (?:of|\d)", r"\bcall \d",
              r"\bsession(?!\.log|-\d\.log)s?\b", r"\bmay be committed\b")


def test_the_run_folders_readmes_describe_the_machine_and_the_commands_only():
    """Issue 61 item 11: the READMEs of the committed run files spoke of issue numbers, the device tool, its
    device-seconds and the sessions that called it."""
    import re

    found = []
    for readme in sorted((ROOT / "docs" / "data").rglob("README.md")):
        for n, line in enumerate(readme.read_text().splitlines(), 1):
            found += [f"{readme.relative_to(ROOT)}:{n}: {m.group(0)!r}" for p in _ORGANISED
                      for m in re.finditer(p, line, flags=re.IGNORECASE)]
    assert found == [], "\n".join(found)
