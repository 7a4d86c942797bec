"""XLA's loop-aware figures and collectives of sharded train steps on 4 virtual CPU devices, as a script in
its own process (the CPU device count is fixed when jax initialises): tests/test_roofline.py starts it
with XLA_FLAGS=--xla_force_host_platform_device_count=4 and reads one JSON object from stdout. The
steps are compiled, never run. argv[1]: a folder for the compiled HLO text of one step (the parser's
test reads it back).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax

from xlabench.backends.jax import hlo_cost, train_case
from xlabench.workloads.train import TrainParams

# (model, sharding, mesh, scan_layers, num_layers, global_batch)
CASES = [
    ("llama-tiny", "fsdp", "fsdp=4", True, 2, 8), ("llama-tiny", "fsdp", "fsdp=4", False, 2, 8),
    ("llama-tiny", "2d", "fsdp=2,tensor=2", True, 2, 8), ("llama-tiny", "2d", "fsdp=2,tensor=2", False, 2, 8),
    ("llama-tiny", "fsdp", "fsdp=4", True, 4, 8), ("llama-tiny", "fsdp", "fsdp=4", True, 6, 8),
]


def main() -> None:
    out_dir = Path(sys.argv[1])
    cases = []
    for model, mode, mesh, scan, layers, batch in CASES:
        p = TrainParams(model=model, sharding=mode, mesh=mesh, scan_layers=scan, num_layers=layers,
                        global_batch=batch, seq_len=128, dtype="float32", remat="full", devices=4)
        # remat full: both layouts recompute the whole forward, so they run one program. (Under remat none a
        # scanned step saves all but attention's probabilities, model.SCAN_NONE_POLICY, and recomputes those:
        # 1.9-2.4% more FLOPs than the unrolled step, which keeps them.)
        prog = train_case.program(p, "naive", interpret=True, platform="cpu")
        compiled, _, _ = prog.compile(donate=False)
        fields, notes = hlo_cost.xla_figures(compiled, p.devices)
        plain = hlo_cost._cost_dict(compiled)
        forward, _ = hlo_cost.xla_figures(prog.compile_forward(), p.devices)
        name = f"{model}-{mode}-scan{int(scan)}-L{layers}"
        (out_dir / f"{name}.hlo.txt").write_text(compiled.as_text())
        cases.append({"name": name, "mode": mode, "scan": scan, "layers": layers, "fields": fields, "notes": notes,
                      "forward": forward,
                      "plain_flops": plain.get("flops"), "plain_bytes": plain.get("bytes accessed"),
                      "model_flops_per_device": p.flops() / p.devices})
    print(json.dumps({"devices": jax.device_count(), "cases": cases}))


if __name__ == "__main__":
    main()
