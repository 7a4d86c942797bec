"""A comment, docstring or doc that cites a name by its module path (``tune.space.KernelConfig``,
``xlabench.flops.attention_io_bytes``) names something that module defines: comments cited
``tune.space.BLOCK_PARAMS`` long after it had moved to workloads.attention (issue 59)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "xlabench"
MODULES = {".".join(p.relative_to(PKG).with_suffix("").parts): p for p in PKG.rglob("*.py") if p.name != "__init__.py"}
# file names (flops.py, roofline.md, roofline.png) and a suite key (``cache.dir``), not citations
NOT_NAMES = {"py", "md", "png", "svg", "dir"}
CITATION = re.compile(r"\b(?:xlabench\.)?((?:[a-z_]+\.)+)([A-Za-z_]\w*)\b")


def citations(text: str) -> list[tuple[str, str]]:
    """(module, name) of each ``pkg.module.name`` in ``text`` whose module is one of the package's."""
    return [(m.group(1)[:-1], m.group(2)) for m in CITATION.finditer(text)
            if m.group(1)[:-1] in MODULES and m.group(2) not in NOT_NAMES]


def defines(module: str, name: str) -> bool:
    pattern = rf"^\s*(?:async def|def|class)\s+{name}\b|^\s*{name}\s*[:=]|^(?:from|import)\s.*\b{name}\b"
    return re.search(pattern, MODULES[module].read_text(), re.M) is not None


def _prose(path: Path) -> str:
    """A module's comments and strings (not its code: ``run.rows.to_dict`` there is an attribute), or a doc."""
    if path.suffix != ".py":
        return path.read_text()
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return "\n".join(t.string for t in tokens if t.type in (tokenize.COMMENT, tokenize.STRING))


def test_the_scan_reads_a_citation():
    assert citations("see tune.space.KernelConfig and xlabench.flops.attention_io_bytes; e.g. 1.5") == [
        ("tune.space", "KernelConfig"), ("flops", "attention_io_bytes")]
    assert defines("tune.space", "KernelConfig") and not defines("tune.space", "BLOCK_PARAMS")


def test_every_cited_name_is_defined_where_the_citation_says():
    files = [*PKG.rglob("*.py"), ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    stale = sorted(f"{path.relative_to(ROOT)}: {module}.{name}" for path in files
                   for module, name in citations(_prose(path)) if not defines(module, name))
    assert stale == []
