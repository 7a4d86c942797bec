"""What the checkout knows of the commits runs were made at: their topological order, commit time and subject
(a run records a short sha, maybe with ``+dirty``; a commit the checkout lacks is simply unknown)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from xlabench.run.envs import ROOT


@dataclass(frozen=True)
class Commit:
    sha: str
    position: int  # in git's topological order, oldest first
    time: str      # committer date, ISO 8601
    subject: str


def bare_sha(git_sha: str) -> str:
    """The sha of a run's git_sha column ('abc123+dirty' -> 'abc123')."""
    return (git_sha or "").split("+")[0].strip()


class GitLog:
    """The commits of a checkout, looked up by (short) sha; empty where there is no git or no checkout.
    Default: xlabench's own checkout, whose commit a run's git_sha column records."""

    def __init__(self, repo: Optional[Path] = None):
        self._by_prefix: dict[str, Commit] = {}
        try:
            out = subprocess.run(["git", "log", "--all", "--topo-order", "--reverse", "--format=%H%x00%cI%x00%s"],
                                 cwd=repo or ROOT, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return
        if out.returncode != 0:
            return
        for i, line in enumerate(out.stdout.splitlines()):
            parts = line.split("\x00")
            if len(parts) != 3:
                continue
            c = Commit(parts[0], i, parts[1], parts[2])
            for n in range(7, 13):
                self._by_prefix.setdefault(c.sha[:n], c)
            self._by_prefix[c.sha] = c

    def get(self, git_sha: str) -> Optional[Commit]:
        sha = bare_sha(git_sha)
        if len(sha) < 7:
            return None
        return self._by_prefix.get(sha) or self._by_prefix.get(sha[:12])
