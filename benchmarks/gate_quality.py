"""How good is the gate on this machine? False alarms, detection rate and the smallest slowdown it catches.

Real measurements, not simulated noise: one CPU attention case (naive XLA attention, forward,
float32) timed again and again as independent runs: each run makes fresh input buffers, compiles
afresh (a new jax.jit of a new function, AOT lower + compile) and times its own warm-up and
iterations, exactly as a worker does for one case (one repeat of ``measure.repeats``). Slowdowns
are real extra work: the candidate computes attention over a larger batch (batch 40 -> 42 .. 48:
+5% .. +20% FLOPs).

Each round emulates three `xlabench run`s of a suite whose cases are the round's arms, with
repeats taken as the runner takes them: in passes over the suite, the first in suite order, later
ones shuffled, so a case's runs are spread over the run, not back to back:

* the baseline suite: one case per arm, all at batch 40 (the code before the change), --base-repeats passes;
* the candidate suite: the arms (batch 40 + extra), --repeats passes;
* the re-run X' of each arm, --repeats runs back to back (`xlabench gate` re-runs only flagged
  cases, so a lone flagged case's re-run has nothing to interleave with); always taken here so
  that every setting can be judged on the same runs.

Per round, arm and setting (metric, threshold, first k <= K passes pooled per side):

* compare (one stage):  gate.assess(A, X) says regression;
* gate (with re-run):   compare flags it AND gate.assess(A, X') says regression again
                        (what gate.confirm decides for a one-case suite: Holm over one case).

A/A arms (X is the same case as A) give the false-alarm rate; the others the detection rate.

    python benchmarks/gate_quality.py                    # ~40 min on 2 shared cores (35 measuring)
    python benchmarks/gate_quality.py --rounds 20 --power-rounds 5    # quick look
    python benchmarks/gate_quality.py --analyze results/gate_quality/<time>.json [more.json: pooled]

Writes results/gate_quality/<time>.json (every sample) and .md, and prints the markdown tables.

**The shipped suite's own settings** (``--suite``): N real ``xlabench run``s of a suite as shipped
(e.g. the attention cpu profile: 48 cases, 5 timed iterations each), one after another, then
``gate.compare`` of every pair of them (the earlier run as the baseline): A/A pairs give the false
alarms of the per-case verdicts and of the suite-wide test; the same pairs with the candidate's
times and samples multiplied by 1.1 and 1.3 (compile times untouched: a change of the timed code)
give their detection rates. Pairs share runs, so they are not independent comparisons: the report
also gives the rates over disjoint pairs of consecutive runs.

    python benchmarks/gate_quality.py --suite suites/attention.yaml --profile cpu --impl naive \
        --impl xla_sdpa --backend jax --runs 16 [--suite-iters 7]       # ~20-45 s per run here
    python benchmarks/gate_quality.py --analyze-suite results/gate_quality/suite-<time>.json [more.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xlabench import gate  # noqa: E402

BASE_BATCH = 40
CASE = dict(num_heads=4, seq_len=64, head_dim=64, causal=False, dtype="float32", mode="fwd")
POWER_EXTRA = [2, 3, 6, 8]     # extra batch rows on top of 40: +5, +7.5, +15, +20%
MAIN_EXTRA = [0, 4]            # A/A and +10%: measured every round


def settings(k_base: int, k: int) -> dict[str, tuple[gate.GateConfig, int, int]]:
    """What is judged, as (config, runs pooled in the baseline, runs pooled per candidate): the defaults
    without repeats, then with repeats, then the shared-host recipe of docs/gate.md (a low quantile,
    a lower threshold, a baseline recorded with more repeats than each candidate run)."""
    shared = gate.GateConfig(metric="p10_s", threshold=0.03)
    out = {
        "defaults, 1 run per side": (gate.GateConfig(), 1, 1),
        f"defaults, --repeats {k} on both sides": (gate.GateConfig(), k, k),
        f"--metric p10_s --threshold 3%, --repeats {k} on both sides": (shared, k, k),
    }
    for kb, kc in sorted({(6, 3), (k_base, k)}):  # the recipe of docs/gate.md, and what was measured
        if kb <= k_base and kc <= k:
            out[f"--metric p10_s --threshold 3%, baseline --repeats {kb}, candidate --repeats {kc}"] = (shared, kb, kc)
    return out


def measure_run(batch: int, warmup: int, iters: int, seed: int) -> list[float]:
    """One independent run of the case: fresh inputs, fresh compile, timed iterations."""
    import jax
    import jax.numpy as jnp

    from xlabench.backends.jax import attention_impls as impls
    from xlabench.backends.jax.common import compile_timed, measure
    from xlabench.measure.timing import TimingPlan
    from xlabench.workloads.attention import AttentionParams, make_inputs

    p = AttentionParams(batch=batch, **CASE)
    host = make_inputs(p, seed=seed)
    q, k, v = (jax.device_put(jnp.asarray(host[n])) for n in ("q", "k", "v"))
    cfg = impls.AttnConfig(causal=p.causal, sm_scale=impls.default_scale(p.head_dim))

    def fwd(q, k, v):  # a new function object: a new trace and compile every run
        return impls.naive(q, k, v, cfg)

    compiled, _, _ = compile_timed(fwd, (q, k, v))
    _, samples, _ = measure(compiled, (q, k, v), TimingPlan(warmup=warmup, iters=iters))
    return samples


def passes(cases: list[int], k: int, rng: np.random.Generator, warmup: int, iters: int, seed: int
           ) -> dict[str, list[list[float]]]:
    """k passes over the cases (batch sizes), as scheduler.run_cases takes repeats: runs per case."""
    runs: dict[str, list[list[float]]] = {str(i): [] for i in range(len(cases))}
    for p in range(k):
        order = list(range(len(cases))) if p == 0 else [int(i) for i in rng.permutation(len(cases))]
        for i in order:
            runs[str(i)].append(measure_run(cases[i], warmup, iters, seed=seed))
    return runs


def collect(rounds: int, power_rounds: int, repeats: int, base_repeats: int, warmup: int, iters: int,
            max_s: float, seed: int) -> dict:
    """Rounds of: the baseline suite (base_repeats passes), the candidate suite (repeats passes),
    each arm's re-run (repeats runs back to back)."""
    rng = np.random.default_rng(seed)
    data: dict = {"iters": iters, "warmup": warmup, "repeats": repeats, "base_repeats": base_repeats,
                  "order": "passes", "rounds": [], "loadavg": []}
    every = max(1, round(rounds / max(power_rounds, 1)))
    started = time.time()
    for r in range(rounds):
        if time.time() - started > max_s:
            print(f"time budget reached after {r} rounds", file=sys.stderr)
            break
        arms = MAIN_EXTRA + (POWER_EXTRA if power_rounds and r % every == 0 else [])
        arms = [int(a) for a in rng.permutation(arms)]  # the suite's case order: no arm always first
        data["loadavg"].append(os.getloadavg()[0])  # other users of the machine
        base = passes([BASE_BATCH] * len(arms), base_repeats, rng, warmup, iters, r)
        cand = passes([BASE_BATCH + a for a in arms], repeats, rng, warmup, iters, r)
        rec: dict = {"A": {str(a): base[str(i)] for i, a in enumerate(arms)}, "arms": {}}
        for i in rng.permutation(len(arms)):
            a = arms[int(i)]
            again = [measure_run(BASE_BATCH + a, warmup, iters, seed=r) for _ in range(repeats)]
            rec["arms"][str(a)] = [cand[str(int(i))], again]
        data["rounds"].append(rec)
        if (r + 1) % 10 == 0:
            print(f"round {r + 1}/{rounds} after {time.time() - started:.0f}s", file=sys.stderr)
    data["wall_s"] = time.time() - started
    return data


def combine(datas: list[dict]) -> dict:
    """Several saved measurements as one: their rounds pooled (same iterations, repeats and layout)."""
    keys = ("iters", "warmup", "repeats", "base_repeats", "order")
    for d in datas[1:]:
        differ = [k for k in keys if d.get(k) != datas[0].get(k)]
        if differ:
            raise ValueError(f"cannot pool measurements that differ in {', '.join(differ)}")
    out = {k: datas[0].get(k) for k in keys}
    out.update(rounds=[r for d in datas for r in d["rounds"]], loadavg=[x for d in datas for x in d["loadavg"]],
               wall_s=sum(d["wall_s"] for d in datas))
    return out


def pooled(runs: list[list[float]], k: int) -> np.ndarray:
    """The first k runs of a side, pooled as `measure.repeats: k` pools them into one row."""
    return np.concatenate([np.asarray(r, dtype=float) for r in runs[:k]])


def analyze(data: dict, cfg: gate.GateConfig, k_base: int, k: int) -> dict:
    """Verdicts per arm; the one-stage (compare) and two-stage-with-re-run (gate) rates."""
    out: dict = {"config": {"metric": cfg.metric, "threshold": cfg.threshold, "alpha": cfg.alpha,
                            "confidence": cfg.confidence, "base_repeats": k_base, "repeats": k}, "arms": {}}
    by_arm: dict[str, dict] = {}
    for i, rec in enumerate(data["rounds"]):
        for extra, (first, again) in rec["arms"].items():
            # Passes: each arm has its own baseline case; the older layout shared one baseline per round.
            a = pooled(rec["A"][extra] if isinstance(rec["A"], dict) else rec["A"], k_base)
            st = by_arm.setdefault(extra, {"n": 0, "compare": 0, "gate": 0, "ratios": []})
            x = pooled(first, k)
            v1 = gate.assess([(a, x)], cfg, [f"{i}-{extra}-1"])[0]
            st["n"] += 1
            st["ratios"].append(v1.ratio)
            if v1.verdict == gate.REGRESSION:
                st["compare"] += 1
                v2 = gate.assess([(a, pooled(again, k))], cfg, [f"{i}-{extra}-2"])[0]
                st["gate"] += int(v2.verdict == gate.REGRESSION)
    for extra in sorted(by_arm, key=int):
        st = by_arm[extra]
        ratios = np.asarray(st.pop("ratios"))
        out["arms"][extra] = {
            "extra_flops": int(extra) / BASE_BATCH,
            "measured_slowdown": float(np.median(ratios) - 1),  # median over rounds of the side ratio
            "ratio_p10_p90": [float(np.percentile(ratios, 10)), float(np.percentile(ratios, 90))],
            **st, "compare_rate": st["compare"] / st["n"], "gate_rate": st["gate"] / st["n"],
        }
    power = [(e["extra_flops"], e["gate_rate"]) for key, e in out["arms"].items() if key != "0"]
    out["smallest_80"] = min((x for x, g in power if g >= 0.8), default=None)
    out["smallest_95"] = min((x for x, g in power if g >= 0.95), default=None)
    return out


def rate(k: int, n: int) -> str:
    if n == 0:
        return "n/a"
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{k}/{n} = {k / n:.1%} (95% CI {ci.low:.1%}-{ci.high:.1%})"


def report(data: dict, results: dict[str, dict]) -> str:
    lines = [f"### Gate quality on real CPU timings (naive attention fwd, batch {BASE_BATCH}, "
             f"S={CASE['seq_len']}, H={CASE['num_heads']}, D={CASE['head_dim']}, float32; "
             f"{data['iters']} timed iterations per run)", "",
             f"{len(data['rounds'])} rounds in {data['wall_s']:.0f}s on {os.cpu_count()} cores with a 1-minute load "
             f"average of {np.median(data['loadavg']):.1f} (median; max {np.max(data['loadavg']):.1f}); "
             f"{data['base_repeats']} baseline runs and 2 x {data['repeats']} runs per candidate arm and round, "
             + ("in passes over the round's suite (each arm its own baseline case)" if data.get("order") == "passes"
                else "back to back (one baseline shared by the round's arms)")
             + "; measured slowdown = median over rounds of the candidate/baseline ratio of the metric's statistic", ""]

    def smallest(x: float | None) -> str:
        return "none of those tried" if x is None else f"+{x:.1%} FLOPs"

    for name, res in results.items():
        cfg = res["config"]
        lines += [f"#### {name} (--metric {cfg['metric']}, threshold {cfg['threshold']:.0%}, alpha {cfg['alpha']}, "
                  f"confidence {cfg['confidence']}; runs pooled: baseline {cfg['base_repeats']}, candidate {cfg['repeats']})", "",
                  "| candidate | extra FLOPs | measured slowdown (p10 to p90 over rounds) | flagged by compare "
                  "| failed by gate (re-run confirms) |", "|---|---|---|---|---|"]
        for extra, e in res["arms"].items():
            label = "A/A (same case)" if extra == "0" else f"batch {BASE_BATCH}+{extra}"
            lo, hi = e["ratio_p10_p90"]
            lines.append(f"| {label} | +{e['extra_flops']:.1%} | {e['measured_slowdown']:+.1%} "
                         f"({lo - 1:+.1%} to {hi - 1:+.1%}) | {rate(e['compare'], e['n'])} | {rate(e['gate'], e['n'])} |")
        lines += ["", f"smallest slowdown failed by gate with >= 80% power: {smallest(res['smallest_80'])}; "
                      f">= 95%: {smallest(res['smallest_95'])}", ""]
    return "\n".join(lines)


def tradeoff(data: dict, metric: str, k_base: int, k: int, thresholds: list[float]) -> str:
    """Share failed by `gate` at other thresholds, from the same runs."""
    results = [(t, analyze(data, gate.GateConfig(metric=metric, threshold=t), k_base, k)) for t in thresholds]
    arms = list(results[0][1]["arms"])
    names = ["A/A" if a == "0" else f"+{int(a) / BASE_BATCH:.1%} FLOPs" for a in arms]
    lines = [f"#### `gate` at other thresholds (--metric {metric}, runs pooled: baseline {k_base}, candidate {k}; "
             "same runs): share failed", "",
             "| threshold | " + " | ".join(names) + " |", "|---" * (1 + len(arms)) + "|"]
    for t, res in results:
        cells = [f"{res['arms'][a]['gate']}/{res['arms'][a]['n']} = {res['arms'][a]['gate_rate']:.0%}" for a in arms]
        lines.append(f"| {t:.1%} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------- the shipped suite's own settings

SHIFTS = (1.0, 1.1, 1.3)  # A/A, then the candidate's times x 1.1 and x 1.3
_TIME_COLUMNS = ("median_s", "mean_s", "min_s", "p10_s", "p90_s", "stdev_s")
_RATE_COLUMNS = ("tflops_per_s", "mfu", "gbytes_per_s", "mbu", "tokens_per_s")


def suite_copy(suite_file: Path, profile: str, backends: list[str] | None, iters: int | None, out: Path) -> Path:
    """The suite file as shipped, or restricted to some backends / with the profile's iters set."""
    import yaml

    spec = yaml.safe_load(suite_file.read_text())
    if backends:
        spec["backends"] = backends
        for prof in spec.get("profiles", {}).values():
            if prof.get("backends"):
                prof["backends"] = [b for b in prof["backends"] if b in backends] or backends
    if iters is not None:
        target = spec["profiles"][profile] if profile not in ("", "base") else spec
        target.setdefault("measure", {})["iters"] = iters
    out.mkdir(parents=True, exist_ok=True)
    path = out / suite_file.name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def record_suite_runs(suite_file: Path, profile: str, impls: list[str], runs: int, out: Path,
                      repeats: int | None = None) -> dict:
    """``runs`` real `xlabench run`s of the suite, one after another (each its own process)."""
    import re
    import subprocess

    index: dict = {"suite_file": str(suite_file), "profile": profile, "impls": impls, "repeats": repeats, "runs": []}
    cmd = [sys.executable, "-m", "xlabench", "run", str(suite_file), "--profile", profile, "--out", str(out / "runs")]
    if repeats:
        cmd += ["--repeats", str(repeats)]
    for impl in impls:
        cmd += ["--impl", impl]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for i in range(runs):
        start, load = time.time(), os.getloadavg()[0]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT))
        found = re.search(r"results: (\S+\.csv)", r.stdout)
        if not found:
            print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
            raise RuntimeError(f"run {i + 1} wrote no results")
        csv = Path(found.group(1))
        index["runs"].append({"csv": str(csv if csv.is_absolute() else ROOT / csv), "start": start,
                              "end": time.time(), "load_start": load, "load_end": os.getloadavg()[0]})
        print(f"run {i + 1}/{runs}: {time.time() - start:.0f}s, load {load:.1f}", file=sys.stderr)
    return index


def scaled(run: gate.RunData, factor: float) -> gate.RunData:
    """The run with every time and per-iteration sample multiplied by ``factor`` (throughputs divided),
    compile times untouched: what a change that slows the timed code by that factor would record."""
    if factor == 1.0:
        return run
    rows, samples = run.rows.copy(), run.samples.copy()
    for col in _TIME_COLUMNS + _RATE_COLUMNS:
        if col in rows:
            rows[col] = rows[col] * (factor if col in _TIME_COLUMNS else 1 / factor)
    samples["seconds"] = samples["seconds"] * factor
    return gate.RunData(Path(f"{run.path.stem}-x{factor:g}.csv"), rows, samples)


def pair_outcome(base: gate.RunData, cand: gate.RunData, cfg: gate.GateConfig,
                 rerun: gate.RunData | None = None) -> dict:
    """What `compare` says of one pair: exit code, suite-wide line, per-case verdict counts; and with
    ``rerun`` (the next run, standing in for gate's re-run of what is flagged) gate's exit code."""
    cmp = gate.compare(base, cand, cfg)
    su = cmp.suite
    out = {"exit": cmp.exit_code, "suite": su.verdict if su else None, "ratio": su.ratio if su else None,
           "ci": [su.ci_low, su.ci_high] if su else None, "p": su.p_value if su else None,
           "host": su.machine_ratio if su else None,
           "cases": {v: cmp.count(v) for v in gate.VERDICTS if cmp.count(v)}, "gate_exit": None}
    if rerun is not None:
        out["gate_exit"] = gate.confirm(cmp, base, lambda ids: rerun, cfg).exit_code
    return out


def analyze_suite(indexes: list[dict], cfg: gate.GateConfig) -> dict:
    """Every pair (earlier run = baseline) of every index's runs, A/A and doctored, judged by compare."""
    out: dict = {"config": {"metric": cfg.metric, "threshold": cfg.threshold, "alpha": cfg.alpha}, "pools": []}
    for index in indexes:
        runs = sorted(index["runs"], key=lambda r: r["start"])
        data = [gate.load_run(r["csv"]) for r in runs]
        pairs = [(i, j) for i in range(len(data)) for j in range(i + 1, len(data))]
        disjoint = {(i, i + 1) for i in range(0, len(data) - 1, 2)}
        pool: dict = {"runs": len(data), "pairs": len(pairs), "disjoint": len(disjoint),
                      "n": [int(n) for n in data[0].rows["n"].dropna()][:1],
                      "cases": int((data[0].rows["status"] == "ok").sum()),
                      "loads": [r["load_start"] for r in runs],
                      "span_s": runs[-1]["end"] - runs[0]["start"],
                      "run_s": [r["end"] - r["start"] for r in runs], "label": index.get("label", ""), "shifts": {}}
        for f in SHIFTS:
            pool["shifts"][str(f)] = [
                dict(pair_outcome(data[i], scaled(data[j], f), cfg, scaled(data[j + 1], f) if j + 1 < len(data) else None),
                     i=i, j=j, disjoint=(i, j) in disjoint) for i, j in pairs]
        out["pools"].append(pool)
    return out


def _share(rows: list[dict], pred) -> str:
    return rate(sum(bool(pred(r)) for r in rows), len(rows))


def suite_report(res: dict) -> str:
    cfg = res["config"]
    lines = []
    for pool in res["pools"]:
        loads = np.asarray(pool["loads"])
        lines += [f"### {pool['label'] or 'suite runs'}: {pool['runs']} runs of {pool['cases']} cases, "
                  f"{pool['n'][0] if pool['n'] else '?'} samples per case", "",
                  f"{pool['pairs']} pairs (earlier run = baseline), of them {pool['disjoint']} disjoint (independent); "
                  f"runs over {pool['span_s'] / 60:.0f} min, {np.median(pool['run_s']):.0f}s each (median), 1-minute "
                  f"load average at their start {np.median(loads):.1f} (median; {loads.min():.1f} to {loads.max():.1f}) "
                  f"on {os.cpu_count()} cores; --metric {cfg['metric']}, --threshold {cfg['threshold']:.0%}", "",
                  "| candidate | pairs | suite-wide regression (exit 1) | suite-wide without the compile-time check "
                  "| suite-wide confounded | any case regression | `compare` exit 3 (could not judge) "
                  "| `compare` exit != 0 | `gate` exit 1 (re-run: the next run) | `gate` exit != 0 |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for f, rows in pool["shifts"].items():
            name = "A/A" if f == "1.0" else f"x {float(f):g} (doctored)"
            for sel, label in ((rows, "all"), ([r for r in rows if r["disjoint"]], "disjoint")):
                g = [r for r in sel if r["gate_exit"] is not None]  # pairs whose candidate has a next run
                lines.append(f"| {name} | {label} {len(sel)} | {_share(sel, lambda r: r['suite'] == gate.REGRESSION)} "
                             f"| {_share(sel, lambda r: r['suite'] in (gate.REGRESSION, gate.CONFOUNDED))} "
                             f"| {_share(sel, lambda r: r['suite'] == gate.CONFOUNDED)} "
                             f"| {_share(sel, lambda r: r['cases'].get(gate.REGRESSION))} "
                             f"| {_share(sel, lambda r: r['exit'] == gate.EXIT_UNJUDGED)} "
                             f"| {_share(sel, lambda r: r['exit'] != 0)} "
                             f"| {_share(g, lambda r: r['gate_exit'] == gate.EXIT_FAIL)} "
                             f"| {_share(g, lambda r: r['gate_exit'] != 0)} |")
        aa = [r for r in pool["shifts"]["1.0"] if r["ratio"] is not None]
        g = np.log([r["ratio"] for r in aa])
        h = np.log([r["host"] for r in aa if r["host"] is not None])
        lines += ["", f"A/A geometric-mean ratio over pairs: p1 {np.exp(np.percentile(g, 1)):.3f}, median "
                      f"{np.exp(np.median(g)):.3f}, p99 {np.exp(np.percentile(g, 99)):.3f} (min {np.exp(g.min()):.3f}, "
                      f"max {np.exp(g.max()):.3f})"
                  + (f"; log correlation with the compile-time ratio {np.corrcoef(g, h)[0, 1]:.2f}"
                     if len(h) == len(g) and np.std(h) > 0 and np.std(g) > 0 else ""), ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=100, help="rounds with A/A and +10%% arms (>= 100 for the goal)")
    ap.add_argument("--power-rounds", type=int, default=20, help="of those, rounds (spread out) that also run the other slowdowns")
    ap.add_argument("--repeats", type=int, default=4, help="runs per candidate side and round")
    ap.add_argument("--base-repeats", type=int, default=8, help="runs of the baseline per round (>= --repeats)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=60, help="timed iterations per run")
    ap.add_argument("--max-minutes", type=float, default=45.0, help="stop starting rounds after this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--analyze", type=Path, nargs="+", default=None,
                    help="re-print the figures of saved JSONs (several: their rounds pooled)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "gate_quality")
    ap.add_argument("--suite", type=Path, default=None, help="record --runs real runs of this suite (as shipped)")
    ap.add_argument("--profile", default="cpu", help="--suite: profile")
    ap.add_argument("--impl", action="append", default=[], help="--suite: impls (repeatable)")
    ap.add_argument("--backend", action="append", default=[], help="--suite: restrict to these backends")
    ap.add_argument("--runs", type=int, default=16, help="--suite: runs to record")
    ap.add_argument("--suite-iters", type=int, default=None, help="--suite: set the profile's measure.iters")
    ap.add_argument("--suite-repeats", type=int, default=None, help="--suite: --repeats of each run")
    ap.add_argument("--label", default="", help="--suite: a name for this set of runs in the report")
    ap.add_argument("--suite-metric", default="median_s", help="--suite, --analyze-suite: the gate's --metric")
    ap.add_argument("--suite-threshold", type=float, default=0.05, help="--suite, --analyze-suite: --threshold")
    ap.add_argument("--analyze-suite", type=Path, nargs="+", default=None,
                    help="judge the runs of saved --suite indexes (each its own pool of pairs)")
    args = ap.parse_args()
    stem = args.out / time.strftime("%Y%m%d-%H%M%S")
    if args.suite or args.analyze_suite:
        if args.analyze_suite:
            indexes = [json.loads(p.read_text()) for p in args.analyze_suite]
        else:
            work = args.out / f"suite-{stem.name}"
            suite = suite_copy(args.suite, args.profile, args.backend, args.suite_iters, work)
            indexes = [record_suite_runs(suite, args.profile, args.impl, args.runs, work, args.suite_repeats)]
            indexes[0]["label"] = args.label
            (work.parent / f"suite-{stem.name}.json").write_text(json.dumps(indexes[0], indent=1))
            print(f"saved the index of the runs to {work.parent / f'suite-{stem.name}.json'}", file=sys.stderr)
        res = analyze_suite(indexes, gate.GateConfig(metric=args.suite_metric, threshold=args.suite_threshold))
        text = suite_report(res)
        print(text)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"suite-analysis-{stem.name}.json").write_text(json.dumps(res))
        (args.out / f"suite-analysis-{stem.name}.md").write_text(text)
        return 0
    if args.analyze:
        try:
            data = combine([json.loads(p.read_text())["data"] for p in args.analyze])
        except ValueError as e:
            ap.error(str(e))
    else:
        if args.base_repeats < args.repeats:
            ap.error("--base-repeats must be >= --repeats")
        data = collect(args.rounds, args.power_rounds, args.repeats, args.base_repeats, args.warmup, args.iters,
                       args.max_minutes * 60, args.seed)
        args.out.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".json").write_text(json.dumps({"data": data}))  # the runs first: the analysis takes minutes
        print(f"saved the runs to {stem}.json", file=sys.stderr)
    k, kb = data["repeats"], data.get("base_repeats", data["repeats"])
    res = {name: analyze(data, cfg, k_base, kk) for name, (cfg, k_base, kk) in settings(kb, k).items()}
    text = (report(data, res) + "\n" + tradeoff(data, "median_s", 1, 1, [0.05, 0.10, 0.15, 0.20])
            + "\n" + tradeoff(data, "p10_s", kb, k, [0.02, 0.03, 0.04, 0.05]))
    print(text)
    if not args.analyze:
        stem.with_suffix(".json").write_text(json.dumps({"result": res, "data": data}))
        stem.with_suffix(".md").write_text(text)
        print(f"saved {stem}.json and .md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
