"""Helpers for tables and charts of results: which columns vary across cases, the labels that tell rows
apart, and numbers for a table cell."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Iterable, Mapping

from xlabench.results.schema import CASE_COLUMN_NAMES
from xlabench.workloads import WORKLOADS
from xlabench.workloads.model_presets import ModelConfig


def _comparable(value: Any) -> Any:
    """A cell value compared as the CSV would hold it: None, NaN and '' are one 'empty' value, 64 == 64.0
    (numpy scalars included), containers by their JSON."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar -> Python
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return value if isinstance(value, (bool, int, float, str)) else str(value)


def varying(records: Iterable[Mapping[str, Any]], keys: Iterable[str] | None = None) -> list[str]:
    """The keys whose value differs between records (dicts, rows, case params): what tells them apart.

    ``keys``: the keys to consider, in the order returned (default: every key, in first-seen order).
    A missing key counts as empty, and empty (None, NaN, '') is one value like any other.
    """
    records = list(records)
    if keys is None:
        keys = list(dict.fromkeys(k for r in records for k in r))
    out = []
    for k in keys:
        seen = {_comparable(r.get(k)) for r in records}
        if len(seen) > 1:
            out.append(k)
    return out


def varying_columns(columns: Mapping[str, Iterable[Any]]) -> list[str]:
    """varying() of records given by column (key -> its values, in the order returned): each column's distinct
    values are made comparable once, not every cell (a report's 48 tables of up to 1000 rows: 0.5 -> 0.05 s).
    Values equal as Python values are one comparable value, so taking each once changes nothing."""
    out = []
    for k, values in columns.items():
        try:
            distinct: Iterable[Any] = set(values)
        except TypeError:  # a container cell
            distinct = values
        if len({_comparable(v) for v in distinct}) > 1:
            out.append(k)
    return out


def fmt_number(value: Any, spec: str, scale: float = 1.0) -> str:
    """A number for a table cell: ``format(value * scale, spec)``, '' where the value is empty or not a number."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(f) else format(f * scale, spec)


CLOCK_WORDS = {"device": "the device clock (the trace's per-iteration device seconds)",
               "wall": "the wall clock (host time around each synced call)"}
# A train step's wall clock is a training loop's (its record's wall_clock "steps"): steps_per_sample steps
# dispatched, one sync
TRAIN_WALL = "the wall clock of training steps dispatched back to back (one sync per sample of steps)"


def clock_note(rows: Iterable[Mapping[str, Any]]) -> str:
    """Which clock the timed rows' times and rates are on (their ``clock`` column), as one line for a
    chart's footer or a table's notes; empty when no row was timed."""
    rows = list(rows)
    clocks = sorted({str(r.get("clock")) for r in rows
                     if _comparable(r.get("median_s")) is not None and _comparable(r.get("clock")) is not None})
    if not clocks:
        return ""
    if len(clocks) == 1:
        if clocks[0] == "wall" and all(_wall_clock(r.get("workload")) == "steps" for r in rows
                                       if _comparable(r.get("median_s")) is not None):
            return f"times and rates on {TRAIN_WALL}"
        return f"times and rates on {CLOCK_WORDS.get(clocks[0], clocks[0])}"
    return "times and rates on mixed clocks (the rows' clock column: " + ", ".join(clocks) + ")"


def _wall_clock(workload: Any) -> str:
    """What a wall-clock sample of the workload spans (its record's wall_clock; "call" for a name no record has)."""
    w = WORKLOADS.get(str(workload))
    return w.wall_clock if w is not None else "call"


def columns_markdown() -> str:
    """The schema as a markdown table (README's column table, `xlabench columns --markdown`)."""
    from xlabench.results.schema import COLUMNS

    lines = ["| column | type | unit | group | meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.dtype} | {c.unit} | {c.group} | {c.doc.replace('|', '/')} |" for c in COLUMNS]
    return "\n".join(lines)


# What can tell two rows' cases apart: the case's parameters (what case_id hashes) and a compile row's target.
LABEL_KEYS = tuple(c for c in CASE_COLUMN_NAMES if c not in ("backend", "impl", "devices")) + ("target",)


_PRESET_FIELDS = {f.name for f in dataclasses.fields(ModelConfig)}


def _follows(records: list[Mapping[str, Any]], key: str, lead: str = "model") -> bool:
    """Whether ``key``'s value is one per value of ``lead`` among the records (the preset's, as named)."""
    seen: dict[Any, Any] = {}
    return all(seen.setdefault(_comparable(r.get(lead)), _comparable(r.get(key))) == _comparable(r.get(key))
               for r in records)


def case_labels(records: Iterable[Mapping[str, Any]], lead: tuple[str, ...] = ("backend", "impl")) -> list[str]:
    """Each record named by what tells it apart from the others: its ``lead`` values joined by '/'
    ('jax/naive'), then key=value for each case parameter (or compile target) whose value differs among
    the records ('causal=True'); a lone record, nothing to tell apart: every parameter it sets."""
    records = list(records)
    keys = varying(records, LABEL_KEYS) if len(records) > 1 else [
        k for k in LABEL_KEYS if records and _comparable(records[0].get(k)) is not None]
    if "model" in keys:  # the preset fixes its shape: d_model, num_layers, ... follow the model's name
        keys = ["model"] + [k for k in keys if k != "model" and not (k in _PRESET_FIELDS and _follows(records, k))]
    out = []
    for r in records:
        head = "/".join(str(_comparable(r.get(k))) for k in lead if _comparable(r.get(k)) is not None)
        said = [f"{k}={_comparable(r.get(k))}" for k in keys if _comparable(r.get(k)) is not None]
        out.append(" ".join([head, *said]).strip())
    return out
