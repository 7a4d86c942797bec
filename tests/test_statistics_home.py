"""Statistics are one package (xlabench/stats/): no other module of xlabench imports scipy or Python's
statistics module, takes a median, percentile or quantile with numpy, or resamples (a generator's
``integers`` or ``choice``). Tests, resampling, quantiles and robust estimators live in xlabench/stats/; a
median of one sample elsewhere calls ``xlabench.stats.summary.median``. Drawing a benchmark's inputs is
not resampling: NOT_STATISTICS lists those lines, as tests/test_units.py lists the literals that are not
units."""

from __future__ import annotations

import ast

from tests._scan import scan

MODULES = {"scipy", "statistics"}  # imported anywhere in a module, a function's body included
NUMPY = {"median", "nanmedian", "percentile", "nanpercentile", "quantile", "nanquantile"}  # np.<name>, called or not
RESAMPLING = {"integers", "choice"}  # <generator>.<name>(...)
# Lines that match the scan and are not statistics: (file under xlabench/, source line).
NOT_STATISTICS = {
    ("workloads/paged.py",  # a paged batch's sequence lengths: an input, drawn once from a fixed seed
     "return np.random.default_rng(LENGTHS_SEED).integers(lo, hi, endpoint=True, size=batch).astype(np.int32)"),
    ("workloads/train.py",  # a train step's token ids: an input
     "return rng.integers(0, p.config().vocab_size, size=(p.batch(), p.seq_len + 1), dtype=np.int32)"),
}


def statistics_code(source: str) -> list[tuple[int, str]]:
    """(line, what) of each piece of statistics in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if a.name.split(".")[0] in MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            top = node.module.split(".")[0]
            if top in MODULES or top == "numpy" and {a.name for a in node.names} & NUMPY:
                found.append((node.lineno, f"from {node.module} import ..."))
        elif (isinstance(node, ast.Attribute) and node.attr in NUMPY and isinstance(node.value, ast.Name)
              and node.value.id in ("np", "numpy")):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RESAMPLING:
            found.append((node.lineno, f".{node.func.attr}(...)"))
    return sorted(found)


def test_the_scan_finds_each_kind_of_statistics():
    source = ("from scipy import stats\nimport scipy.special\nimport statistics\nm = np.median(x)\n"
              "q = numpy.nanquantile(x, 0.5)\nf = np.percentile\nidx = rng.integers(0, n, (k, n))\n"
              "pick = rng.choice(x, 5)\nfrom numpy import median\n"
              "def f():\n    from scipy.stats import mannwhitneyu\n")
    assert [line for line, _ in statistics_code(source)] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 11]
    assert statistics_code("from xlabench.stats.summary import median\nm = median(x)\ns = np.std(x)\n"
                           "from xlabench.stats import bootstrap\nrng.shuffle(x)\nimport numpy as np\n") == []


def test_no_statistics_outside_the_stats_package():
    offenders, allowed = scan(statistics_code, NOT_STATISTICS, lambda rel: rel.startswith("stats/"),
                              "statistics belong in xlabench/stats/")
    assert offenders == []
    assert allowed == NOT_STATISTICS, f"allow-list entries that no longer match a line: {sorted(NOT_STATISTICS - allowed)}"
