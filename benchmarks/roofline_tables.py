"""The tables of docs/roofline.md, from compile CSVs written by `xlabench compile` (nothing is typed in):

- attention for v5e-8: XLA's intensity per impl and sequence length against the analytic bytes of Q, K,
  V, O (flash) and Q, K, V, O plus the S x S logits (naive);
- a train suite for v4-8: per sharding mode and impl, the roofline time, collective time, the MFU
  ceiling, and the collectives per kind (bytes per device per step).

    python benchmarks/roofline_tables.py attention results/attention/RUN.compile.csv
    python benchmarks/roofline_tables.py train results/llama/RUN.compile.csv [--published suites/llama.yaml]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import yaml

from xlabench import flops as F

GB = 1e9


def attention(df: pd.DataFrame) -> str:
    rows = df[(df["status"] == "compiled") & (df["causal"].astype(str) == "False")]
    out = ["| impl | mode | S | batch | XLA FLOP/B | analytic FLOP/B | XLA bytes / analytic bytes | bound by |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows.sort_values(["mode", "impl", "seq_len"]).itertuples():
        item = 2 if r.dtype == "bfloat16" else 4
        io = F.attention_io_bytes(r.batch, r.num_heads, r.num_kv_heads, r.seq_len, r.kv_seq_len, r.head_dim, item,
                                  r.mode)
        nbytes = io + (F.attention_logits_bytes(r.batch, r.num_heads, r.seq_len, r.kv_seq_len, r.mode)
                       if r.impl == "naive" else 0.0)
        analytic_ai = r.kernel_flops / nbytes
        src = "" if str(r.roofline_source).startswith("XLA") else " *"
        out.append(f"| {r.impl} | {r.mode} | {r.seq_len} | {r.batch} | {r.arith_intensity:.1f}{src} | "
                   f"{analytic_ai:.1f} | {r.xla_bytes_accessed / nbytes:.2f} | {r.bound_by} |")
    out.append("\n\\* XLA counted fewer than the model's FLOPs (no cost estimate in the kernel): the row's "
               "intensity is the analytic FLOPs over max(XLA bytes, Q/K/V/O bytes).")
    return "\n".join(out)


def train(df: pd.DataFrame, published: list[dict]) -> str:
    rows = df[df["status"] == "compiled"].sort_values(["global_batch", "sharding", "impl"])
    pub = {(p["sharding"], p["global_batch"]): p["mfu"] for p in published}
    out = ["| batch | sharding | impl | TFLOP per step (model) | XLA / model FLOPs | FLOP/B | roofline ms | "
           "collective ms | bound by | MFU ceiling | published MFU |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows.itertuples():
        p = pub.get((r.sharding, r.global_batch))
        out.append(f"| {r.global_batch} | {r.sharding} | {r.impl} | {r.flops / 1e12:,.0f} | {r.flops_ratio:.2f} | "
                   f"{r.arith_intensity:.0f} | {r.bound_s * 1e3:.0f} | {r.collective_s * 1e3:.0f} | {r.bound_by} | "
                   f"{r.mfu_ceiling:.1%} | {'' if p is None else f'{p:.2%}'} |")
    out += ["", "Collectives per device per step (GB, count):", "",
            "| batch | sharding | impl | all-gather | reduce-scatter | all-reduce | all-to-all | collective-permute | total GB |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in rows.itertuples():
        c = json.loads(r.collectives)
        cells = [f"{c[k]['bytes'] / GB:.2f} ({c[k]['count']})" if k in c else "" for k in
                 ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")]
        out.append(f"| {r.global_batch} | {r.sharding} | {r.impl} | " + " | ".join(cells)
                   + f" | {r.collective_bytes / GB:.2f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["attention", "train"])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--published", type=Path, help="a suite file whose published: figures go beside the ceilings")
    a = ap.parse_args()
    df = pd.read_csv(a.csv)
    if a.kind == "attention":
        print(attention(df))
    else:
        pub = yaml.safe_load(a.published.read_text()).get("published", []) if a.published else []
        print(train(df, pub))


if __name__ == "__main__":
    main()
