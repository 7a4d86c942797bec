"""repeats.pool: K independent runs of one case become one reply."""

from __future__ import annotations

import pytest

from xlabench.run import repeats
from xlabench.harness import summarize


def _reply(samples, err=0.0, correct=True, tokens=None):
    fields = {**summarize(samples), "compile_s": 1.5, "max_abs_err": err, "correct": correct, "notes": "n1"}
    if tokens is not None:
        fields["tokens_per_s"] = tokens / fields["median_s"]
    return {"status": "ok", "fields": fields, "samples": list(samples)}


def test_pooled_stats_cover_every_sample_and_rates_follow_the_pooled_median():
    a, b, c = [1.0, 1.1, 0.9], [2.0, 2.1, 1.9], [3.0, 3.1, 2.9]
    out = repeats.pool([_reply(a, tokens=100), _reply(b, err=0.2, tokens=100), _reply(c, tokens=100)])
    f = out["fields"]
    assert out["samples"] == a + b + c and f["n"] == 9 and f["median_s"] == 2.0
    assert f["tokens_per_s"] == pytest.approx(100 / 2.0)  # a rate per median_s, rescaled
    assert f["max_abs_err"] == 0.2 and f["correct"] is True and f["compile_s"] == 1.5
    assert f["notes"] == "n1; 3 repeats pooled (medians 1000 ms, 2000 ms, 3000 ms)"


def test_one_wrong_repeat_makes_the_row_wrong():
    out = repeats.pool([_reply([1.0] * 3), _reply([1.0] * 3, err=9.0, correct=False)])
    assert out["fields"]["correct"] is False and out["fields"]["max_abs_err"] == 9.0


def test_a_single_reply_is_unchanged():
    r = _reply([1.0, 2.0])
    assert repeats.pool([r]) is r
