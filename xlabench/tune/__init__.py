"""Autotuning of kernel block sizes, framework-free: candidate spaces, the staged search on whatever
compiles and times a candidate, the on-disk cache keyed by device and versions. The backends supply the
compile and timing functions. Its modules: README.md, Layout."""

from xlabench.tune.cache import TuneCache, cache_key, default_dir
from xlabench.tune.search import Dropped, Stage, TuneOutcome, checked_search, search
from xlabench.tune.space import Blocks, blocks_text, parse_blocks, pow2_tiles
from xlabench.tune.store import TuneKey, TuneStore

__all__ = ["Blocks", "Dropped", "Stage", "TuneCache", "TuneOutcome", "blocks_text", "cache_key", "checked_search", "default_dir",
           "parse_blocks", "pow2_tiles", "search", "TuneKey", "TuneStore"]
