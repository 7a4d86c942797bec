"""Commit order from the checkout: runs sorted in git's topological order (not their start times) when the
checkout knows every commit, by start time otherwise; the commit's time and subject recorded, and the
subject escaped on the page."""

from __future__ import annotations

import subprocess
from pathlib import Path

import _history_data as hd
from xlabench.history import html, ingest, series, store as st
from xlabench.history.gitlog import GitLog, bare_sha

SUBJECT = "speed up <img src=x onerror=alert(1)> & more"


def _repo(path: Path, n: int) -> list[str]:
    """A git repository with n commits; their short shas, oldest first."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "HOME": str(path), "PATH": "/usr/bin:/bin"}
    path.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=path, check=True, env=env)
    shas = []
    for i in range(n):
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", f"{SUBJECT} {i}"], cwd=path, check=True,
                       env={**env, "GIT_COMMITTER_DATE": f"2026-01-0{1 + i % 9}T00:00:00Z"})
        shas.append(subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=path, check=True, env=env,
                                   capture_output=True, text=True).stdout.strip())
    return shas


def test_runs_follow_git_order_not_start_time(tmp_path):
    shas = _repo(tmp_path / "repo", 6)
    # run i is at commit 5 - i: started in the reverse of the commit order
    paths = hd.write_series(tmp_path / "runs", [1.0] * 6, n_cases=2, shas=list(reversed(shas)))
    git = GitLog(tmp_path / "repo")
    assert git.get(shas[2] + "+dirty").position == 2 and bare_sha("abc+dirty") == "abc"
    with st.open_store(f"sqlite:///{tmp_path / 'h.sqlite'}") as s:
        ingest.add_files(s, paths, git)
        (g,) = series.groups(s, git=git)
        assert g.ordered_by == "git" and [r["git_sha"] for r in g.runs] == shas
        assert g.runs[0]["commit_message"] == f"{SUBJECT} 0" and g.runs[0]["commit_time"].startswith("2026-01-01")
        (by_time,) = series.groups(s, git=GitLog(tmp_path / "not-a-repo"))
        assert by_time.ordered_by == "started" and [r["git_sha"] for r in by_time.runs] == list(reversed(shas))
        index = html.write_site(s, [g], {0: []}, tmp_path / "site")
    page = next(p for p in index.parent.glob("*.html") if p.name != "index.html").read_text()
    assert "speed up &lt;img src=x onerror=alert(1)&gt; &amp; more 5" in page and "<img" not in page
