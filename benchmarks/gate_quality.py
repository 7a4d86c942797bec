"""How good is the gate on this machine? False alarms, detection rate and the smallest slowdown it catches.

Real measurements, not simulated noise: one CPU attention case (naive XLA attention, forward,
float32) timed again and again as independent runs: each run makes fresh input buffers, compiles
afresh (a new jax.jit of a new function, AOT lower + compile) and times its own warm-up and
iterations, exactly as a worker does for one case. Slowdowns are real extra work: the candidate
computes attention over a larger batch (batch 40 -> 41 .. 48: +2.5% .. +20% FLOPs).

Runs are taken in interleaved rounds so slow periods of the shared machine hit every arm alike.
Each round measures the baseline A, then a run X of every candidate arm; when compare flags X, a
second run X' follows at once (what `xlabench gate` does with a flagged case). Per round and arm:

* compare (one stage):  gate.assess(A, X) says regression (flagged under any of CONFIGS: re-run);
* gate (with re-run):   compare flags it AND gate.assess(A, X') says regression again
                        (what gate.confirm decides for a one-case suite: Holm over one case).

A/A arms (X is the same case as A) give the false-alarm rate; the others the detection rate.

    python benchmarks/gate_quality.py                 # ~6-9 min on 2 shared cores
    python benchmarks/gate_quality.py --rounds 20 --power-rounds 10   # quick look

Writes results/gate_quality/<time>.json (every sample) and .md, and prints the markdown table.
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
# The defaults of `compare`/`gate`, and the low-quantile metric meant for shared hosts.
CONFIGS = {"median_s": gate.GateConfig(), "p10_s": gate.GateConfig(metric="p10_s")}


def measure_run(batch: int, warmup: int, iters: int, seed: int) -> tuple[list[float], float]:
    """One independent run of the case: fresh inputs, fresh compile, timed iterations."""
    import jax
    import jax.numpy as jnp

    from xlabench.backends.jax import attention_impls as impls
    from xlabench.backends.jax.common import compile_timed, measure
    from xlabench.harness import TimingPlan
    from xlabench.workloads.attention import AttentionParams, make_inputs

    p = AttentionParams(batch=batch, **CASE)
    host = make_inputs(p, seed=seed)
    q, k, v = (jax.device_put(jnp.asarray(host[n])) for n in ("q", "k", "v"))
    cfg = impls.AttnConfig(causal=p.causal, sm_scale=impls.default_scale(p.head_dim))

    def fwd(q, k, v):  # a new function object: a new trace and compile every run
        return impls.naive(q, k, v, cfg)

    compiled, lower_s, compile_s = compile_timed(fwd, (q, k, v))
    _, samples, _ = measure(compiled, (q, k, v), TimingPlan(warmup=warmup, iters=iters))
    return samples, lower_s + compile_s


def flagged(a: list[float], x: list[float], cfg: gate.GateConfig, key: str) -> bool:
    return gate.assess([(np.asarray(a), np.asarray(x))], cfg, [key])[0].verdict == gate.REGRESSION


def collect(rounds: int, power_rounds: int, warmup: int, iters: int, max_s: float, seed: int,
            configs: dict[str, gate.GateConfig]) -> dict:
    """Interleaved rounds; a candidate run that compare flags is re-run at once, as gate does."""
    rng = np.random.default_rng(seed)
    data: dict = {"iters": iters, "warmup": warmup, "rounds": [], "compile_s": []}
    every = max(1, round(rounds / max(power_rounds, 1)))
    started = time.time()
    for r in range(rounds):
        if time.time() - started > max_s:
            print(f"time budget reached after {r} rounds", file=sys.stderr)
            break
        arms = MAIN_EXTRA + (POWER_EXTRA if power_rounds and r % every == 0 else [])
        arms = [int(a) for a in rng.permutation(arms)]  # no arm always runs first or last
        data.setdefault("loadavg", []).append(os.getloadavg()[0])  # other users of the machine
        a, c = measure_run(BASE_BATCH, warmup, iters, seed=r)
        data["compile_s"].append(c)
        rec: dict = {"A": a, "arms": {}}
        for extra in arms:
            first, c = measure_run(BASE_BATCH + extra, warmup, iters, seed=r)
            data["compile_s"].append(c)
            again = None
            if any(flagged(a, first, cfg, f"{r}-{extra}-1") for cfg in configs.values()):
                again, c = measure_run(BASE_BATCH + extra, warmup, iters, seed=r)
                data["compile_s"].append(c)
            rec["arms"][str(extra)] = [first, again]
        data["rounds"].append(rec)
        if (r + 1) % 10 == 0:
            print(f"round {r + 1}/{rounds} after {time.time() - started:.0f}s", file=sys.stderr)
    data["wall_s"] = time.time() - started
    return data


def rate(k: int, n: int) -> str:
    if n == 0:
        return "n/a"
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{k}/{n} = {k / n:.1%} (95% CI {ci.low:.1%}-{ci.high:.1%})"


def analyze(data: dict, cfg: gate.GateConfig) -> dict:
    """Verdicts per arm; the one-stage (compare) and two-stage-with-re-run (gate) rates."""
    out: dict = {"config": {"metric": cfg.metric, "threshold": cfg.threshold, "alpha": cfg.alpha,
                            "confidence": cfg.confidence}, "arms": {}}
    by_arm: dict[str, dict] = {}
    for i, rec in enumerate(data["rounds"]):
        a = np.asarray(rec["A"])
        for extra, (first, again) in rec["arms"].items():
            st = by_arm.setdefault(extra, {"n": 0, "compare": 0, "gate": 0, "mwu_only": 0, "ratios": []})
            v1 = gate.assess([(a, np.asarray(first))], cfg, [f"{i}-{extra}-1"])[0]
            st["n"] += 1
            st["ratios"].append(v1.ratio)
            st["mwu_only"] += int(v1.p_holm <= cfg.alpha and v1.ratio > 1)  # a test without the threshold
            if v1.verdict == gate.REGRESSION:
                st["compare"] += 1
                if again is None:
                    raise ValueError("a flagged run has no re-run: analyse with the settings it was measured with")
                v2 = gate.assess([(a, np.asarray(again))], cfg, [f"{i}-{extra}-2"])[0]
                st["gate"] += int(v2.verdict == gate.REGRESSION)
    for extra in sorted(by_arm, key=int):
        st = by_arm[extra]
        ratios = np.asarray(st.pop("ratios"))
        out["arms"][extra] = {
            "extra_flops": int(extra) / BASE_BATCH,
            "measured_slowdown": float(np.median(ratios) - 1),  # median over rounds of the run ratio
            "run_ratio_p10_p90": [float(np.percentile(ratios, 10)), float(np.percentile(ratios, 90))],
            **st,
            "compare_rate": st["compare"] / st["n"], "gate_rate": st["gate"] / st["n"],
        }
    power = [(e["extra_flops"], e["gate_rate"]) for k, e in out["arms"].items() if k != "0"]
    out["smallest_80"] = min((f for f, g in power if g >= 0.8), default=None)
    out["smallest_95"] = min((f for f, g in power if g >= 0.95), default=None)
    return out


def report(data: dict, results: dict[str, dict]) -> str:
    samples = data["iters"]
    lines = [f"### Gate quality on real CPU timings (naive attention fwd, batch {BASE_BATCH}, "
             f"S={CASE['seq_len']}, H={CASE['num_heads']}, D={CASE['head_dim']}, float32; "
             f"{samples} timed iterations per run)", "",
             f"{len(data['rounds'])} rounds in {data['wall_s']:.0f}s on {os.cpu_count()} cores with a 1-minute load "
             f"average of {np.median(data['loadavg']):.1f} (median; max {np.max(data['loadavg']):.1f}); median compile "
             f"{np.median(data['compile_s']):.3f}s per run (a fresh compile every run); "
             f"measured slowdown = median over rounds of the candidate/baseline ratio of the metric", ""]

    def smallest(f: float | None) -> str:
        return "none of those tried" if f is None else f"+{f:.1%} FLOPs"

    for name, res in results.items():
        cfg = res["config"]
        lines += [f"#### --metric {cfg['metric']}: threshold {cfg['threshold']:.0%}, alpha {cfg['alpha']}, "
                  f"confidence {cfg['confidence']}", "",
                  "| candidate | extra FLOPs | measured slowdown (p10 to p90 over rounds) | flagged by compare "
                  "| failed by gate (re-run confirms) | U-test alone, no threshold |",
                  "|---|---|---|---|---|---|"]
        for extra, e in res["arms"].items():
            label = "A/A (same case)" if extra == "0" else f"batch {BASE_BATCH}+{extra}"
            lo, hi = e["run_ratio_p10_p90"]
            lines.append(f"| {label} | +{e['extra_flops']:.1%} | {e['measured_slowdown']:+.1%} "
                         f"({lo - 1:+.1%} to {hi - 1:+.1%}) | {rate(e['compare'], e['n'])} "
                         f"| {rate(e['gate'], e['n'])} | {rate(e['mwu_only'], e['n'])} |")
        lines += ["", f"smallest slowdown failed by gate with >= 80% power: {smallest(res['smallest_80'])}; "
                      f">= 95%: {smallest(res['smallest_95'])}", ""]
    return "\n".join(lines)


def tradeoff(data: dict, metric: str, thresholds: list[float]) -> str:
    """False alarms and detection of `gate` at other thresholds, from the same runs.

    Valid for thresholds >= the one the runs were measured with: a case flagged at a higher
    threshold is flagged at the lower one too, so its re-run exists.
    """
    results = [(t, analyze(data, gate.GateConfig(metric=metric, threshold=t))) for t in thresholds]
    arms = list(results[0][1]["arms"])
    names = ["A/A" if k == "0" else f"+{int(k) / BASE_BATCH:.1%} FLOPs" for k in arms]
    lines = [f"#### `gate` at other thresholds (--metric {metric}, same runs): share failed by gate", "",
             "| threshold | " + " | ".join(names) + " |", "|---" * (1 + len(arms)) + "|"]
    for t, res in results:
        cells = [f"{res['arms'][k]['gate']}/{res['arms'][k]['n']} = {res['arms'][k]['gate_rate']:.0%}" for k in arms]
        lines.append(f"| {t:.1%} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=100, help="rounds with A/A and +10%% arms (>= 100 for the goal)")
    ap.add_argument("--power-rounds", type=int, default=20, help="of those, rounds (spread out) that also run the other slowdowns")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=60, help="timed iterations per run")
    ap.add_argument("--max-minutes", type=float, default=9.0, help="stop starting rounds after this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--analyze", type=Path, default=None, help="re-print the figures of a saved JSON")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "gate_quality")
    args = ap.parse_args()
    if args.analyze:
        data = json.loads(args.analyze.read_text())["data"]
    else:
        data = collect(args.rounds, args.power_rounds, args.warmup, args.iters, args.max_minutes * 60, args.seed,
                       CONFIGS)
    res = {name: analyze(data, cfg) for name, cfg in CONFIGS.items()}
    text = report(data, res) + "\n" + tradeoff(data, "median_s", [0.05, 0.075, 0.10, 0.15, 0.20])
    print(text)
    if not args.analyze:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = args.out / time.strftime("%Y%m%d-%H%M%S")
        stem.with_suffix(".json").write_text(json.dumps({"result": res, "data": data}))
        stem.with_suffix(".md").write_text(text)
        print(f"saved {stem}.json and .md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
