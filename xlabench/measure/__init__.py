"""The framework-free measuring core, on the bottom floor: what every other package may import.

Modules: ``timers`` (the timer names), ``plan`` (TimingPlan: how one case is timed), ``timing`` (the
timing loop, its statistics, the correctness measure), ``messages`` (the typed requests and replies
between parent and worker, versioned), ``target`` (TargetSpec, the slice a compile-only case is for),
``worker_env`` (the environment variables a worker is started with), ``power`` (the samples a case
needs before the gate's test can call it significant).
"""
