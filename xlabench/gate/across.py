"""One framework against another on the same cases (`compare --backends A,B`): the baseline's rows of backend
A and the candidate's rows of backend B (one run holding both, or two runs) paired by their case without its
backend. Each side becomes a run of its own whose rows carry that pairing key as their case id and the pair
(``A vs B``) as their backend, so the statistics, the checks and the report are compare's own. The frameworks'
versions are what is compared, so they are not an environment mismatch; the chip must be one (JAX's
'TPU v5 lite' and TorchTPU's 'TPU v5e' name one chip: hardware's record)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from xlabench import hardware, results
from xlabench.gate.config import GateInputError
from xlabench.gate.pairing import _norm
from xlabench.gate.run_data import RunData

# A case without its backend: what a row of one framework and its counterpart of the other share.
PAIRED = [c for c in results.CASE_COLUMN_NAMES if c not in ("devices", "backend")]


def pair_key(row: dict[str, Any]) -> str:
    """The id of a row's case with its backend left out."""
    blob = json.dumps({c: _norm(row.get(c)) for c in PAIRED}, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def parse_pair(text: str) -> tuple[str, str]:
    """'jax,torch_tpu' -> ('jax', 'torch_tpu'); GateInputError for anything else."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise GateInputError(f"--backends {text!r}: expected two different backends, BASELINE,CANDIDATE "
                             "(e.g. jax,torch_tpu)")
    return parts[0], parts[1]


def side(run: RunData, backend: str, label: str) -> tuple[RunData, list[str]]:
    """``run``'s rows of ``backend`` as a run of their own, keyed by pair_key; (it, the frameworks' versions)."""
    rows = run.rows[run.rows["backend"].astype(str) == backend].copy()
    if rows.empty:
        have = ", ".join(sorted(set(run.rows["backend"].astype(str))))
        raise GateInputError(f"{run.path} has no {backend} rows (its backends: {have})")
    old = rows["case_id"].astype(str).tolist()
    new = [pair_key(r) for r in rows.to_dict("records")]
    versions = sorted({str(v) for v in rows["framework_version"] if isinstance(v, str) and v})
    rows["case_id"], rows["backend"] = new, label
    rows["device_kind"] = [hardware.chip_name(k) if isinstance(k, str) and k else k for k in rows["device_kind"]]
    rows["framework_version"] = None  # the frameworks are the comparison, not a mismatch
    ids = dict(zip(old, new))
    samples = run.samples[run.samples["case_id"].astype(str).isin(ids)].copy()
    samples["case_id"] = samples["case_id"].astype(str).map(ids)
    return replace(run, rows=rows, samples=samples), versions


def across(base: RunData, cand: RunData, pair: tuple[str, str]) -> tuple[RunData, RunData, list[str]]:
    """(the baseline backend's side, the candidate backend's side, a note naming the frameworks compared)."""
    label = f"{pair[1]} vs {pair[0]}"
    b, bv = side(base, pair[0], label)
    c, cv = side(cand, pair[1], label)
    note = (f"frameworks compared case by case: baseline {pair[0]} ({'; '.join(bv) or '?'}) against candidate "
            f"{pair[1]} ({'; '.join(cv) or '?'})")
    return b, c, [note]
