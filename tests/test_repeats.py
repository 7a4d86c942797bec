"""rows.measured: K independent runs of one case become one measurement, summarised once in the parent;
rates are derived after pooling."""

from __future__ import annotations

import dataclasses
import json

import pytest

from xlabench.measure.timing import TimingPlan, case_result
from xlabench.run.rows import measured, pooled
from xlabench.run.metrics import derive
from xlabench.protocol.worker_messages import PROTOCOL_VERSION, CaseResult, ProtocolError

ENV = {"platform": "cpu", "device_kind": "cpu", "device_count": 1}


def _reply(samples, err=0.0, tokens=None, tol=1.0):
    return case_result(list(samples), TimingPlan(), None, 1.5, None, err, tol, "n1",
                       tokens_per_step=tokens, flops=1e9)


def test_pooled_stats_cover_every_sample():
    a, b, c = [1.0, 1.1, 0.9], [2.0, 2.1, 1.9], [3.0, 3.1, 2.9]
    out = measured([_reply(a, tokens=100), _reply(b, err=0.2, tokens=100), _reply(c, tokens=100)])
    f = out.fields
    assert list(out.samples) == a + b + c and f["n"] == 9 and f["median_s"] == 2.0
    assert f["max_abs_err"] == 0.2 and f["correct"] is True and f["compile_s"] == 1.5
    assert f["notes"] == "n1; 3 repeats pooled (medians 1000 ms, 2000 ms, 3000 ms)"
    assert "tokens_per_s" not in f and out.tokens_per_step == 100  # a count: the parent derives the rate


def test_tokens_per_s_is_derived_once_from_the_pooled_median():
    out = measured([_reply([1.0, 1.1, 0.9], tokens=100), _reply([2.0, 2.1, 1.9], tokens=100),
                    _reply([3.0, 3.1, 2.9], tokens=100)])
    d = derive(out, ENV, 1, None)
    assert d["tokens_per_s"] == 100 / out.fields["median_s"] == 50.0
    assert "tokens_per_s_per_device" not in d  # paged: a single-device kernel has no per-device rate
    assert d["tflops_per_s"] == pytest.approx(1e9 / 2.0 / 1e12)
    train = dataclasses.replace(out, tokens_global=True)
    assert derive(train, ENV, 4, None)["tokens_per_s_per_device"] == 50.0 / 4
    assert "tokens_per_s" not in derive(measured([_reply([1.0])]), ENV, 1, None)  # no count, no rate


def test_one_wrong_repeat_makes_the_row_wrong():
    out = pooled([_reply([1.0] * 3), _reply([1.0] * 3, err=9.0)])
    assert out.correct is False and out.max_abs_err == 9.0


def test_a_single_reply_is_unchanged():
    r = _reply([1.0, 2.0])
    assert pooled([r]) is r


def test_case_result_crosses_the_worker_pipe_unchanged():
    r = _reply([1.0, 2.0, 4.0], err=0.5, tokens=64).replace(tokens_global=True, lower_s=0.25,
                                                                   compile_cached=True)
    msg = json.loads(json.dumps(r.to_message()))
    assert msg["type"] == "CaseResult" and msg["version"] == PROTOCOL_VERSION
    back = CaseResult.from_message(msg)
    assert back == r
    assert list(measured([back]).fields) == ["n", "median_s", "mean_s", "min_s", "p10_s", "p90_s", "stdev_s", "cv",
                                             "clock", "wall_median_s", "timer", "lower_s", "compile_s",
                                             "compile_cached", "warmup", "flops", "peak_memory_bytes", "max_abs_err",
                                             "err_tol", "correct", "notes"]


def test_the_workers_reply_carries_samples_and_no_statistic_of_them():
    """Issue 42: the worker summarised its samples and the parent summarised them again; now the reply has
    the samples (and device samples) only, and a reply carrying a statistic is refused, named."""
    msg = json.loads(json.dumps(_reply([1.0, 2.0, 4.0]).replace(timer="trace", device_samples=(0.5, 1.0)).to_message()))
    summary = set(measured([CaseResult.from_message(msg)]).fields) - set(CaseResult.from_message(msg).fields)
    assert summary >= {"n", "median_s", "p10_s", "cv", "clock", "wall_median_s", "device_median_s"}
    assert not summary & set(msg) and msg["samples"] == [1.0, 2.0, 4.0] and msg["device_samples"] == [0.5, 1.0]
    with pytest.raises(ProtocolError, match="unknown field.*stats"):
        CaseResult.from_message({**msg, "stats": {"median_s": 2.0}})


def test_a_reply_with_an_unknown_or_missing_field_or_another_version_is_an_error_naming_it():
    msg = json.loads(json.dumps(_reply([1.0, 2.0]).to_message()))
    with pytest.raises(ProtocolError, match="unknown field.*flops_per_s"):
        CaseResult.from_message({**msg, "flops_per_s": 1.0})
    with pytest.raises(ProtocolError, match="missing field.*samples"):
        CaseResult.from_message({k: v for k, v in msg.items() if k != "samples"})
    with pytest.raises(ProtocolError, match="protocol version 0"):
        CaseResult.from_message({**msg, "version": 0})
    with pytest.raises(ProtocolError, match="is a 'CompileResult'"):
        CaseResult.from_message({**msg, "type": "CompileResult"})




def test_a_field_of_the_wrong_type_is_an_error_naming_it():
    """#36: pydantic decodes the messages; the hand-written decoder let samples ['x'] or a text warmup through."""
    msg = json.loads(json.dumps(_reply([1.0, 2.0]).to_message()))
    with pytest.raises(ProtocolError, match=r"^CaseResult: field samples\.0: "):
        CaseResult.from_message({**msg, "samples": ["x"]})
    with pytest.raises(ProtocolError, match=r"^CaseResult: field warmup: "):
        CaseResult.from_message({**msg, "warmup": "two"})
    assert CaseResult.from_message(msg).samples == (1.0, 2.0)
