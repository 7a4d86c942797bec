"""The best kernel configuration per shape, and only where it honestly beats the default.

Among the usable rows (ok and correct) of a sweep over a workload's tuned parameters
(workloads.TUNED_PARAMS: attention's block_q / block_k), per backend, impl and shape: every
configuration is tested against the kernel's default (the rows that leave them unset) with the
gate's own two-stage test on the raw samples (the ``.samples.csv`` beside each CSV): Mann-Whitney U
with Holm over every configuration of the sweep, and the bootstrap interval of the ratio wholly
beyond the threshold (xlabench.gate.assess). The winner is the fastest configuration so judged an
improvement; when there is none the row says "no significant winner" and the tuned file keeps the
default. The fastest of a few noisy samples is not a winner: with 5 samples per configuration the
minimum median alone "won" 2.15x where the default had only run first.

Never tuned from: interpreted rows (Pallas in the CPU interpreter: a pipeline check, not kernel
speed), flagged in the table; a group with no default row (nothing to beat); groups that swept fewer
than two configurations (not a choice). A wrong or failed row is never picked, however fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from xlabench import gate
from xlabench import impls as catalog
from xlabench.impls import attention_rules
from xlabench.report import chartdata as cd
from xlabench.report.chartdata import Samples
from xlabench.suite.tuned import TunedConfig, value
from xlabench.units import to_ms
from xlabench.workloads import PARAMS as WORKLOAD_PARAMS
from xlabench.workloads import TUNED_PARAMS

WINNER = "winner"
DEFAULT_FASTEST = "default is fastest"
NO_WINNER = "no significant winner"
INTERPRETED = "interpreted: not tuned"
NO_DEFAULT = "no default row: not tuned"


@dataclass(frozen=True)
class Pick:
    """One shape's outcome: what the tuned file gets (``config``, None: no entry) and why."""

    verdict: str
    shown: TunedConfig  # the winner, else the fastest configuration by median (params as run)
    config: Optional[TunedConfig]
    test: Optional[gate.Assessment] = None  # shown vs default (ratio = shown / default)
    reason: str = ""
    # where the rows ran: device_kind, clock, run_ids, configurations swept (what the tuning cache keeps)
    source: Mapping[str, Any] = field(default_factory=dict)


def _shape_columns(rows: pd.DataFrame, workload: str) -> list[str]:
    """The workload's case parameters other than the tuned ones that appear in the rows."""
    tuned = TUNED_PARAMS[workload]
    return [c for c in WORKLOAD_PARAMS[workload].model_fields if c in rows and c not in tuned]


@dataclass
class _Group:
    """One backend, impl and shape of a sweep: its usable rows per configuration."""

    workload: str
    row: pd.Series  # any row of the group (backend, impl, shape)
    shape: list[str]
    tuned: list[str]
    by_config: dict[tuple, pd.DataFrame]
    median: pd.Series
    interpreted: bool

    def config(self, key: tuple, speedup: Optional[float] = None, default: bool = False) -> TunedConfig:
        rows = self.by_config[key]
        best = rows.loc[self.median[rows.index].idxmin()]
        params = {k: None if default else value(best[k]) for k in self.tuned}
        return TunedConfig(self.workload, str(self.row["backend"]), str(self.row["impl"]),
                           {k: value(self.row[k]) for k in self.shape if value(self.row[k]) is not None},
                           {k: v for k, v in params.items() if v is not None} or {k: None for k in self.tuned},
                           float(self.median[best.name]), speedup)

    def samples(self, key: tuple, samples: Samples) -> np.ndarray:
        """The configuration's samples, pooled over its rows (several runs of it)."""
        rows = self.by_config[key]
        got = [samples.get((str(run), str(case))) for run, case in zip(rows["run_id"], rows["case_id"])]
        return np.concatenate([g for g in got if g is not None]) if any(g is not None for g in got) else np.array([])

    @property
    def default_key(self) -> Optional[tuple]:
        keys = [k for k in self.by_config if all(v == "nan" for v in k)]  # cd.text of unset cells
        return keys[0] if keys else None

    def fastest_key(self) -> tuple:
        return min(self.by_config, key=lambda k: float(self.median[self.by_config[k].index].min()))


def _groups(df: pd.DataFrame) -> list[_Group]:
    out = []
    runs = cd.run_rows(df)
    for workload in cd.distinct(runs["workload"]):
        if workload not in TUNED_PARAMS:
            continue
        rows = runs[(runs["workload"] == workload)].reset_index(drop=True)
        tuned, shape = list(TUNED_PARAMS[workload]), _shape_columns(rows, workload)
        median = cd.metric(rows, "median_s")
        measured = median.notna().to_numpy()
        cells = {c: cd.text(rows[c]).tolist() for c in dict.fromkeys(["backend", "impl", *shape, *tuned])}
        for at in cd.positions(list(zip(*(cells[c] for c in ["backend", "impl", *shape])))):
            ok = at[measured[at]]
            taken = [t for t in tuned if t in _takes(cells["backend"][at[0]], cells["impl"][at[0]], tuned)]
            if not taken:
                continue
            configs = [tuple(cells[t][i] for t in taken) for i in ok]
            if len(set(configs)) < 2:
                continue
            by_config = {k: rows.iloc[v] for k, v in zip(*_configs(ok, configs))}
            out.append(_Group(workload, rows.iloc[ok[0]], shape, taken, by_config, median,
                              cd.interpreted(rows.iloc[ok])))
    return out


def _configs(ok: np.ndarray, configs: list[tuple]) -> tuple[list[tuple], list[np.ndarray]]:
    """The configurations in first-seen order, and the positions (of ``ok``) of each one's rows."""
    at = cd.positions(configs)
    return [configs[a[0]] for a in at], [ok[a] for a in at]


def _takes(backend: str, impl: str, tuned: Sequence[str]) -> tuple[str, ...]:
    """The tuned parameters an impl takes: a built-in's declared block parameters (naive takes none: its rows
    at any block size are one configuration); a user impl's are in its own code: all of them."""
    if catalog.is_user(impl) or catalog.find(backend, impl, "attention") is None:
        return tuple(tuned)
    return tuple(attention_rules.rule(backend, impl).get("block_params", ()))


def best_configs(df: pd.DataFrame, samples: Optional[Samples] = None,
                 cfg: gate.GateConfig = gate.GateConfig()) -> list[Pick]:
    """Per (workload, backend, impl, shape) that swept >= 2 configurations: the pick and why.

    ``samples`` (load_samples of the CSVs): without them no configuration can be shown to beat the default.
    """
    samples = samples or {}
    groups = _groups(df)
    picks: list[Optional[Pick]] = [None] * len(groups)
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    tested: list[tuple[int, tuple]] = []  # (group index, configuration) per pair
    for i, g in enumerate(groups):
        d = g.default_key
        fastest = g.config(g.fastest_key())
        if g.interpreted:
            picks[i] = Pick(INTERPRETED, fastest, None, reason="rows ran in the CPU interpreter (interpret=true): "
                            "a pipeline check, not kernel speed")
        elif d is None:
            picks[i] = Pick(NO_DEFAULT, fastest, None, reason="no row with the tuned parameters unset to beat")
        else:
            for k in g.by_config:
                if k != d:
                    tested.append((i, k))
                    pairs.append((g.samples(d, samples), g.samples(k, samples)))
    assessed = gate.assess(pairs, cfg, [f"{i}:{k}" for i, k in tested])  # Holm over every configuration tested
    by_group: dict[int, dict[tuple, gate.Assessment]] = {}
    for (i, k), a in zip(tested, assessed):
        by_group.setdefault(i, {})[k] = a
    for i, tests in by_group.items():
        picks[i] = _decide(groups[i], tests)
    return [replace(p, source=_source(g)) for p, g in zip(picks, groups) if p is not None]


def _source(g: _Group) -> dict[str, Any]:
    rows = pd.concat(list(g.by_config.values()))
    return {"device_kind": str(g.row["device_kind"]), "clock": str(g.row.get("clock") or "wall"),
            "run_ids": sorted({str(r) for r in rows["run_id"]}), "configurations": len(g.by_config)}


def _decide(g: _Group, tests: dict[tuple, gate.Assessment]) -> Pick:
    """The fastest configuration judged an improvement over the default; else the default is kept."""
    d = g.default_key
    default_s = float(g.median[g.by_config[d].index].min())
    fk = g.fastest_key()
    fastest = g.config(fk, default_s / float(g.median[g.by_config[fk].index].min()))
    wins = [k for k, a in tests.items() if a.verdict == gate.IMPROVEMENT]
    if wins:
        w = min(wins, key=lambda k: tests[k].candidate)
        a = tests[w]
        won = g.config(w, 1 / a.ratio)
        return Pick(WINNER, won, won, a, a.reason)
    keep = g.config(d, 1.0, default=True)
    if fk == d:
        return Pick(DEFAULT_FASTEST, fastest, keep, reason="no configuration beats the default's median")
    a = tests[fk]
    return Pick(NO_WINNER, fastest, replace(keep, speedup_vs_default=None), a,
                f"the fastest is not significantly faster than the default ({a.verdict}: {a.reason}); default kept")


def _vs_default(p: Pick) -> str:
    a = p.test
    if a is None or a.ratio is None:
        return "1.00x" if p.verdict == DEFAULT_FASTEST else ""
    return f"{1 / a.ratio:.2f}x [{1 / a.ci_high:.2f}, {1 / a.ci_low:.2f}]"


def _varying(configs: Sequence[TunedConfig]) -> list[str]:
    shape_keys = list(dict.fromkeys(k for c in configs for k in c.shape))
    return [k for k in shape_keys if len({str(c.shape.get(k)) for c in configs}) > 1]


def notes(picks: Sequence[Pick]) -> list[str]:
    """One line per shape left untuned (no significant winner, interpreted, no default row): why."""
    varying = _varying([p.shown for p in picks])
    out = []
    for p in picks:
        if p.verdict in (NO_WINNER, INTERPRETED, NO_DEFAULT):
            shape = " ".join(f"{k}={cd.fmt_value(k, p.shown.shape.get(k))}" for k in varying)
            out.append(f"{p.shown.backend}/{p.shown.impl}{' ' + shape if shape else ''}: {p.verdict}: {p.reason}")
    return out


def _picked(p: Pick, params: list[str], median: str) -> list[str]:
    """The configuration's cells and its median; '-' and empty where nothing was judged (interpreted rows,
    no default row): a fastest configuration printed there would read as a choice."""
    if p.verdict in (INTERPRETED, NO_DEFAULT):
        return ["-"] * len(params) + [""]
    return [*params, median]


def table_rows(picks: Sequence[Pick]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows for a table of picks (the varying shape columns only): the winner (else the
    fastest configuration), its speedup over the default with the 95% interval, Holm's p, the verdict."""
    configs = [p.shown for p in picks]
    varying = _varying(configs)
    tuned = list(dict.fromkeys(k for c in configs for k in c.params))
    headers = ["backend", "impl", *varying, *tuned, "median ms", "speedup [95% CI]", "p", "verdict"]
    rows = [[c.backend, c.impl, *[cd.fmt_value(k, c.shape.get(k)) for k in varying],
             *_picked(p, [("default" if c.params.get(k) is None else str(c.params.get(k))) for k in tuned],
                      f"{to_ms(c.median_s):.4g}" if c.median_s is not None else ""), _vs_default(p),
             "" if p.test is None or p.test.p_holm is None else f"{p.test.p_holm:.2g}", p.verdict]
            for p, c in zip(picks, configs)]
    return headers, rows
