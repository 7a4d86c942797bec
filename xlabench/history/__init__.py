"""History: every run remembered in a store, each case's series over the commits, change points found at
their commit.

Modules: ``store`` (SQLite or PostgreSQL by URL, schema version and migrations, one transaction per run),
``ingest`` (a run's files, checked by the gate's loader, as a record), ``gitlog`` (commit order, time and
subject from the checkout), ``changes`` (change points and their size, on arrays), ``series`` (the store's
runs as series per suite and environment, and their changes). No CLI, no printing, no framework.
"""

# The significance of a change point per series (cases: family-wise over a suite's cases, Holm); Apache
# Otava's default is 0.001. Here, not in ``changes``, so the CLI names it without importing scipy.
ALPHA = 0.01
