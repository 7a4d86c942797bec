"""Running a suite: its options (one frozen RunOptions: filters, measure overrides, ranges), the session (`xlabench run` and `compile` as library calls, resume), the scheduler
(cases in passes, one row each as it ends), the worker pool, interrupts, the workers' environments
(envs), multi-host runs (distributed), shards, pooled repeats and derived metrics. The parent never
imports a framework: every framework runs in a worker process (xlabench/worker).
"""
