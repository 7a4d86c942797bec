"""The recorded runs a run's estimate is made from (run/estimate.py): every run committed under
``docs/data/`` (a ``<run>.meta.json`` beside its CSV), each case's seconds read from its row's timestamp.
Read with the csv module, only the columns the estimate needs; a file that cannot be read is passed over
(an estimate is advice, never a reason for a run to stop)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path
from typing import Any, Iterator, Optional

from xlabench import results
from xlabench.run.envs import ROOT
from xlabench.run.estimate import RecordedCase, RecordedRun, tune_way
from xlabench.tune.table import same_chip

RECORDS = ROOT / "docs" / "data"
GROUP = ("workload", "backend", "impl")  # a recorded case's own fields, not its parameters


def slice_label(env: dict[str, Any]) -> str:
    """'TPU v5 lite x1': a worker's device kind and count (a run's meta ``env``)."""
    return f"{env.get('device_kind') or env.get('platform') or '?'} x{int(env.get('device_count') or 1)}"


def same_slice(a: str, b: str) -> bool:
    """Whether two slice labels name one slice: the same count of one chip, whichever framework named the chip
    (JAX's 'TPU v5 lite x1', TorchTPU's 'TPU v5e x1')."""
    (ka, _, na), (kb, _, nb) = a.rpartition(" x"), b.rpartition(" x")
    return a == b or (na == nb and same_chip(ka, kb))


def _when(text: Any) -> Optional[dt.datetime]:
    try:
        t = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _float(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return 0.0


def read_run(meta_path: Path, platform: str) -> Optional[RecordedRun]:
    """The run of one meta file and its CSV where it ran on ``platform``; None where it did not, or where
    either file cannot be read."""
    try:
        meta = json.loads(meta_path.read_text())
        if not isinstance(meta, dict) or not isinstance(meta.get("env"), dict) or meta["env"].get("platform") != platform:
            return None
        csv_path = meta_path.with_name(meta_path.name[: -len(".meta.json")] + ".csv")
        with csv_path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    last = _when(meta.get("started"))
    if last is None:
        return None
    cases = []
    for r in rows:  # the CSV has its rows as they ended: each took the time since the row before
        t = _when(r.get("timestamp"))
        if t is None or not r.get("case_id"):
            continue
        params = {k: r[k] for k in results.CASE_COLUMN_NAMES if r.get(k) not in (None, "") and k not in GROUP}
        cases.append(RecordedCase(r["case_id"], r.get("workload", ""), r.get("backend", ""), r.get("impl", ""),
                                  params, max((t - last).total_seconds(), 0.0), _float(r.get("tune_s")),
                                  tune_way(r.get("tuned"))))
        last = max(last, t)
    return RecordedRun(str(meta.get("run_id", meta_path.stem)), str(meta.get("suite", "")), slice_label(meta["env"]),
                       str(meta["started"])[:10], tuple(cases))


def _metas(root: Path) -> Iterator[Path]:
    for p in sorted(root.rglob("*.meta.json")):
        if not p.name.endswith(results.COMPILE_SUFFIX.replace(".csv", ".meta.json")):
            yield p


def recorded_runs(suite: str, platform: str, slice: Optional[str] = None,
                  root: Path = RECORDS) -> list[RecordedRun]:
    """The runs recorded on ``slice`` (else on the slice of the newest run of ``suite`` on ``platform``),
    this suite's first, each newest first."""
    found = [r for r in (read_run(p, platform) for p in _metas(root)) if r is not None and r.cases]
    runs = sorted(found, key=lambda r: r.run_id, reverse=True)
    if slice is None:
        own = [r for r in runs if r.suite == suite]
        slice = (own or runs)[0].slice if runs else None
    runs = [r for r in runs if same_slice(r.slice, slice)]
    return [r for r in runs if r.suite == suite] + [r for r in runs if r.suite != suite]

