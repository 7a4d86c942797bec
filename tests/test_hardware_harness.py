"""Peak-table lookup and the timing harness's accounting (behaviour, not speed)."""

from __future__ import annotations

import numpy as np
import pytest

from xlabench import hardware
from xlabench.measure.timing import TimingPlan, time_calls
from xlabench.stats.summary import summarize


@pytest.mark.parametrize("kind,name,tflops", [
    ("TPU v5 lite", "TPU v5e", 197), ("TPU v5e", "TPU v5e", 197), ("TPU v5p", "TPU v5p", 459),
    ("TPU v4", "TPU v4", 275), ("TPU v6 lite", "TPU v6e", 918), ("TPU v3", "TPU v3", 61.5),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989), ("NVIDIA H100 PCIe", "H100 PCIe", 756),
    ("NVIDIA H200", "H200", 989), ("NVIDIA A100-SXM4-80GB", "A100", 312),
])
def test_lookup(kind, name, tflops):
    p = hardware.lookup(kind)
    assert p is not None and p.name == name and p.tflops_per_device == tflops and p.source


def test_unknown_kind_and_cpu():
    assert hardware.lookup("cpu") is None
    cpu = hardware.device_peak("cpu", "cpu", measured_cpu_tflops=0.4, device_count=8)
    assert cpu.tflops == pytest.approx(0.05) and cpu.source.startswith("measured")
    unknown = hardware.device_peak("tpu", "TPU v99")
    assert unknown.tflops is None and "--peak-tflops" in unknown.source
    assert hardware.device_peak("tpu", "TPU v4", override_tflops=100).tflops == 100


def test_time_calls_counts_and_syncs():
    calls, synced = [], []
    samples, out = time_calls(lambda: calls.append(1) or len(calls), synced.append, TimingPlan(warmup=2, iters=5))
    assert len(samples) == 5 and len(calls) == 7 and synced == list(range(1, 8)) and out == 7


def test_min_time_extends_iterations():
    import time
    samples, _ = time_calls(lambda: time.sleep(0.01), lambda x: x, TimingPlan(warmup=0, iters=2, min_time_s=0.1))
    assert len(samples) >= 5 and sum(samples) >= 0.09


def test_summarize_matches_numpy():
    xs = [3.0, 1.0, 2.0, 10.0, 4.0]
    s = summarize(xs)
    assert s["median_s"] == 3.0 and s["min_s"] == 1.0 and s["n"] == 5
    assert s["p90_s"] == pytest.approx(np.percentile(xs, 90))
    assert s["stdev_s"] == pytest.approx(np.std(xs, ddof=1))
    assert s["cv"] == pytest.approx(np.std(xs, ddof=1) / np.mean(xs))
