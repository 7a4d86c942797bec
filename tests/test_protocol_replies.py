"""The worker's reply envelope and its probe env, typed (xlabench/protocol/replies.py)."""

from __future__ import annotations

import pytest

from xlabench.protocol.replies import Reply, WorkerEnv
from xlabench.protocol.worker_messages import ProtocolError


def test_a_reply_round_trips_and_sends_only_what_it_holds():
    r = Reply(status="skipped", error="needs a TPU")
    assert r.to_message() == {"status": "skipped", "error": "needs a TPU"}
    assert Reply.from_message(r.to_message()) == r
    assert Reply.from_message({"fit": [{"model": "m"}]}).fit == [{"model": "m"}]
    with pytest.raises(ProtocolError, match="not a worker reply"):
        Reply.from_message({"status": "ok", "verdict": "?"})
    with pytest.raises(ProtocolError):
        Reply.from_message(["env"])


def test_the_probe_env_is_typed_and_kept_whole():
    env = WorkerEnv.from_message({"platform": "cpu", "device_kind": "cpu", "device_count": 4, "jax": "0.10"})
    assert (env.platform, env.device_kind, env.device_count, env.process_count) == ("cpu", "cpu", 4, 1)
    env.update({"measured_cpu_tflops": 1.5})  # the run records its CPU peak in the first worker's env
    assert {**env}["measured_cpu_tflops"] == 1.5 and env.to_message()["jax"] == "0.10"
    with pytest.raises(ProtocolError, match="no platform"):
        WorkerEnv.from_message({"device_count": 1})
