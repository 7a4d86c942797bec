"""History: every run remembered in a store, each case's series over the commits, change points found at
their commit.

Its modules: README.md, Layout. No CLI, no printing, no framework.
"""

# The significance of a change point per series (cases: family-wise over a suite's cases, Holm); Apache
# Otava's default is 0.001. Here, not in ``changes``, so the CLI names it without importing scipy.
ALPHA = 0.01
