"""What tuning costs and what the cache saves, from run files (a benchmark, not a test).

    python benchmarks/tune_cost.py RUN.csv [--against CACHED.csv UNTUNED.csv]

For RUN.csv: per impl and mode, the cases searched and read from the cache, the seconds each search took
(median, max, total), the candidates it compiled and those dropped by reason, and what the winner bought
(default_s / tune_best_s on the search's clock). With --against: the wall time of two runs of the same
cases (from the run's start in its meta to each row's timestamp), over the cases both have, and their ratio
(the cost of a run whose winners come from the cache against one that does not tune)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from xlabench import results


def _ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def cost_table(csv: Path) -> list[str]:
    rows = results.read_rows(csv).to_dict("records")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("tuned") in ("search", "cache"):
            groups[(r["impl"], r["mode"])].append(r)
    out = ["| impl | mode | searched | from cache | tune s median / max / total | candidates | dropped | "
           "default / tuned |", "|---|---|---|---|---|---|---|---|"]
    total = Counter()
    for (impl, mode), rs in sorted(groups.items()):
        searched = [r for r in rs if r["tuned"] == "search"]
        secs = [float(r["tune_s"]) for r in searched]
        dropped: Counter = Counter()
        for r in searched:
            for word in str(r.get("tune_dropped") or "").replace("nan", "").split():
                k, _, v = word.partition("=")
                dropped[k] += int(v)
        gain = [float(r["default_s"]) / float(r["tune_best_s"]) for r in rs
                if r.get("default_s") == r.get("default_s") and r.get("tune_best_s")]
        total.update(searched=len(searched), cache=len(rs) - len(searched), seconds=sum(secs))
        out.append(f"| {impl} | {mode} | {len(searched)} | {len(rs) - len(searched)} | "
                   + (f"{statistics.median(secs):.1f} / {max(secs):.1f} / {sum(secs):.0f}" if secs else "-")
                   + f" | {sum(int(r['tune_tried']) for r in searched)} | "
                   + (" ".join(f"{k}={v}" for k, v in sorted(dropped.items())) or "-")
                   + f" | {min(gain):.2f}x .. {max(gain):.2f}x |" if gain else " | - |")
    n = total["searched"] + total["cache"]
    out.append(f"\n{n} tuned case(s): {total['searched']} searched in {total['seconds']:.0f} s "
               f"({total['seconds'] / max(1, total['searched']):.1f} s each), {total['cache']} from the cache "
               f"(hit rate {total['cache'] / max(1, n):.0%})")
    return out


def run_seconds(csv: Path, ids: set[str]) -> float:
    meta = json.loads(results.RunFiles(csv).meta.read_text())
    rows = [r for r in results.read_rows(csv).to_dict("records") if r["case_id"] in ids]
    return (max(_ts(r["timestamp"]) for r in rows) - _ts(meta["started"])).total_seconds()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--against", nargs=2, type=Path, metavar=("CACHED", "UNTUNED"))
    a = ap.parse_args()
    print("\n".join(cost_table(a.csv)))
    if a.against:
        cached, untuned = a.against
        ids = (set(results.read_rows(cached)["case_id"]) & set(results.read_rows(untuned)["case_id"]))
        c, u = run_seconds(cached, ids), run_seconds(untuned, ids)
        print(f"\n{len(ids)} case(s) in both runs: from the cache {c:.0f} s, untuned {u:.0f} s, ratio {c / u:.3f}")


if __name__ == "__main__":
    main()
