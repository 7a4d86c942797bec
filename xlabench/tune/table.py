"""The shipped block-size tables: one JSON file per chip (the file its record in xlabench/hardware.py names,
else ``tables/<slug>.json`` of the device kind, e.g. ``tpu_v6_lite.json`` for "TPU v6 lite"), each entry a search's winner measured on that chip, so a first run
starts from it instead of a search.

- **Key.** backend, impl and the case's tuning fields (tune_key_fields: kernel mode, causal, dtype, heads,
  KV heads, head_dim, sequence; page size and context for the paged kernels), with the batch rounded up to
  a power of two (``bucket``: 1, 2, 4, ... 32, 64, ...) and ``total_pages`` (the paged cache, batch x pages
  per sequence by default) compared per sequence. One entry per key.
- **Lookup** (``Table.find``): the entry whose key is the case's (same bucket), else the nearest bucket of
  the same other fields (the fewest doublings away; a tie goes to the larger bucket), else none.
- **Version policy.** The user's cache keys a winner by the jax / jaxlib / runtime versions and the
  candidate space (tune/cache.py); a table entry names the versions it was measured at but is used under
  any, and verified on the machine that uses it (search.verify: the winner and the default re-timed; a
  search when the winner is more than CHECK_TOL off its recorded time, scaled by the batch, or slower than
  the default).
- **Build** (``build``): from tune-cache folders and earlier tables; a later source wins a key.

``$XLABENCH_TUNE_TABLES`` names another folder of tables (a contributor's, or an empty one: no table)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from xlabench import cache, hardware
from xlabench.tune.cache import ENTRY_VERSION

FORMAT = 1
ENV_TABLE_DIR = "XLABENCH_TUNE_TABLES"
PACKAGE_DIR = Path(__file__).resolve().parent / "tables"
PER_BATCH = ("total_pages",)  # case fields that grow with the batch: keyed per sequence
BUCKET_RULE = ("batch rounded up to a power of two; total_pages per sequence; a miss takes the nearest bucket "
               "of the same other fields (fewest doublings, a tie to the larger)")


class TableError(ValueError):
    """A table file that cannot be read or does not hold a table (its one-line reason)."""


def slug(device_kind: str) -> str:
    """'TPU v5 lite' -> 'tpu_v5_lite': the table file's stem."""
    return re.sub(r"[^a-z0-9]+", "_", str(device_kind).lower()).strip("_")


def same_chip(a: str, b: str) -> bool:
    """Whether two device kinds name one chip: one chip record matches both (JAX's 'TPU v5 lite' and
    TorchTPU's 'TPU v5e'), else the same slug."""
    return hardware.chip_name(a) == hardware.chip_name(b) or slug(a) == slug(b)


def table_dir() -> Path:
    return Path(os.environ[ENV_TABLE_DIR]) if os.environ.get(ENV_TABLE_DIR) else PACKAGE_DIR


def table_name(device_kind: str) -> str:
    """The table file of ``device_kind``: the one its chip record names (hardware.CHIPS' tuning_table), else
    ``<slug>.json`` (a contributor's table for a chip that ships none)."""
    chip = hardware.lookup(device_kind)
    return chip.tuning_table if chip is not None and chip.tuning_table else f"{slug(device_kind)}.json"


def table_path(device_kind: str) -> Path:
    return table_dir() / table_name(device_kind)


def bucket(batch: int) -> int:
    """The batch's bucket: the smallest power of two >= batch (1 for batch <= 1)."""
    return 1 << max(0, int(batch) - 1).bit_length()


def bucket_key(case: Mapping[str, Any]) -> dict[str, Any]:
    """The table key of a case's tuning fields: ``batch`` as its bucket (``batch_bucket``), the PER_BATCH
    fields per sequence."""
    out = {k: v for k, v in case.items() if k != "batch" and k not in PER_BATCH}
    b = case.get("batch")
    if isinstance(b, int) and b > 0:
        out["batch_bucket"] = bucket(b)
        for name in PER_BATCH:
            if isinstance(case.get(name), int):
                per = case[name] / b
                out[f"{name}_per_batch"] = int(per) if per == int(per) else round(per, 6)
    elif b is not None:
        out["batch"] = b
    return {k: out[k] for k in sorted(out)}


def _family(case: Mapping[str, Any]) -> str:
    """The key without its bucket: what must match exactly for a nearest-bucket hit."""
    return json.dumps({k: v for k, v in bucket_key(case).items() if k != "batch_bucket"}, sort_keys=True, default=str)


def describe(impl: str, c: Mapping[str, Any]) -> str:
    """'flash fwd_bwd causal bfloat16 S=512 b=32', 'paged bfloat16 page=64 ctx=4096 b=16': a case in a line."""
    causal = c.get("causal")
    return " ".join(str(x) for x in (
        impl, c.get("mode"), "" if causal is None else ("causal" if causal else "non-causal"), c.get("dtype"),
        f"S={c['seq_len']}" if "seq_len" in c else "",
        f"page={c['page_size']} ctx={c['context_lens']}" if "page_size" in c else "",
        f"b={c['batch']}" if "batch" in c else "") if x)


@dataclass(frozen=True)
class TableEntry:
    """One shipped winner: where it applies (backend, impl, the case as measured), the kernel's config
    (``blocks``), its time and the default's on ``clock``, and what it was measured at."""

    backend: str
    impl: str
    case: Mapping[str, Any]  # the tuning fields as measured (the batch exact; the key buckets it)
    blocks: Mapping[str, int]
    best_s: float
    default_s: Optional[float]
    clock: str = "device"
    space: str = ""  # the candidate space's fingerprint when it was searched (informative: it is verified)
    check: str = ""
    commit: str = ""
    date: str = ""
    versions: Mapping[str, str] = dataclasses.field(default_factory=dict)  # jax, jaxlib, libtpu, runtime

    def key(self) -> dict[str, Any]:
        return {"backend": self.backend, "impl": self.impl, **bucket_key(self.case)}

    def key_text(self) -> str:
        return json.dumps(self.key(), sort_keys=True, default=str)

    @property
    def batch(self) -> Optional[int]:
        b = self.case.get("batch")
        return b if isinstance(b, int) and b > 0 else None

    def label(self) -> str:
        """'flash fwd_bwd causal bfloat16 S=512 b=32 (7683fc5, 2026-12-07)': the entry a row names."""
        return f"{describe(self.impl, self.case)} ({self.commit or 'commit ?'}, {self.date or 'date ?'})"

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["case"] = {k: self.case[k] for k in sorted(self.case)}
        d["blocks"] = {k: int(self.blocks[k]) for k in sorted(self.blocks)}
        d["versions"] = {k: self.versions[k] for k in sorted(self.versions)}
        return {"key": self.key(), **d}

    @classmethod
    def from_json(cls, d: Any) -> "TableEntry":
        if not isinstance(d, dict):
            raise TableError(f"an entry is a {type(d).__name__}, not an object")
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in ("backend", "impl", "case", "blocks", "best_s") if n not in d]
        if missing:
            raise TableError(f"an entry lacks {', '.join(missing)}")
        try:
            e = cls(**{n: d[n] for n in names if n in d})
            blocks = {str(k): int(v) for k, v in dict(e.blocks).items()}
            best = float(e.best_s)
            dflt = None if e.default_s is None else float(e.default_s)
        except (TypeError, ValueError) as err:
            raise TableError(f"an entry is malformed: {err}") from None
        if not isinstance(e.case, dict) or not blocks or not (math.isfinite(best) and best > 0):
            raise TableError(f"an entry of {e.impl} has no case, no blocks or no positive best_s")
        return dataclasses.replace(e, blocks=blocks, best_s=best, default_s=dflt, case=dict(e.case),
                                   versions=dict(e.versions or {}))


@dataclass(frozen=True)
class Hit:
    """A table entry found for a case: ``exact`` (its bucket) or the nearest bucket; ``scale``: the case's
    batch over the entry's (its recorded time scaled by it is what the case should take)."""

    entry: TableEntry
    exact: bool
    scale: float
    source: str  # the table file's name

    def note(self) -> str:
        how = "" if self.exact else " (nearest batch bucket)"
        return f"{self.source}: {self.entry.label()}{how}"


@dataclass(frozen=True)
class Table:
    device_kind: str
    entries: tuple[TableEntry, ...]
    source: str = ""

    def find(self, backend: str, impl: str, case: Mapping[str, Any]) -> Optional[Hit]:
        """The entry for ``case`` (its tuning fields): the same key, else the nearest bucket (module doc)."""
        want = {"backend": backend, "impl": impl, **bucket_key(case)}
        same = [e for e in self.entries if e.backend == backend and e.impl == impl]
        exact = [e for e in same if e.key() == want]
        fam = _family(case)
        near = [e for e in same if not exact and _family(e.case) == fam and e.batch and "batch_bucket" in want]
        if exact:
            hit, is_exact = exact[0], True
        elif near:
            b = want["batch_bucket"]
            hit = min(near, key=lambda e: (abs(math.log2(bucket(e.batch)) - math.log2(b)), -bucket(e.batch)))
            is_exact = False
        else:
            return None
        batch = case.get("batch")
        scale = batch / hit.batch if isinstance(batch, int) and hit.batch else 1.0
        return Hit(hit, is_exact, scale, self.source)

    def to_json(self) -> dict[str, Any]:
        entries = sorted(self.entries, key=lambda e: e.key_text())
        return {"format": FORMAT, "device_kind": self.device_kind, "bucket_rule": BUCKET_RULE,
                "entries": [e.to_json() for e in entries]}


def read_table(path: Path | str) -> Table:
    """The table in ``path``; TableError (one line) when it cannot be read or is not a table."""
    path = Path(path)
    try:
        data = cache.read_json(path)
    except OSError as e:
        raise TableError(f"{path}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:
        raise TableError(f"{path}: not JSON ({str(e).splitlines()[0] if str(e) else e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list) or "device_kind" not in data:
        raise TableError(f"{path}: not a tuning table (an object with device_kind and entries)")
    if data.get("format") != FORMAT:
        raise TableError(f"{path}: table format {data.get('format')!r}, this xlabench reads format {FORMAT}")
    try:
        entries = tuple(TableEntry.from_json(e) for e in data["entries"])
    except TableError as e:
        raise TableError(f"{path}: {e}") from None
    return Table(str(data["device_kind"]), entries, path.name)


def write_table(path: Path | str, table: Table) -> Path:
    """Write ``table`` (entries sorted by key: a regenerated table diffs by what changed)."""
    return cache.write_json(Path(path), table.to_json(), indent=1, sort_keys=False, default=str)


_LOADED: dict[tuple[str, int], tuple[Optional[Table], str]] = {}


def for_device(device_kind: str) -> tuple[Optional[Table], str]:
    """(the table of ``device_kind``, "") or (None, why there is none: no shipped table, or a damaged file, in
    one line). Read once per file version in a process."""
    path = table_path(device_kind)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None, f"no shipped tuning table for {device_kind} ({path.name}): its kernels are searched"
    got = _LOADED.get((str(path), stamp))
    if got is None:
        try:
            t = read_table(path)
            got = (t, "") if same_chip(t.device_kind, device_kind) else (
                None, f"tuning table {path}: holds {t.device_kind!r}, not {device_kind!r}: ignored, kernels are searched")
        except TableError as e:
            got = (None, f"tuning table ignored, kernels are searched: {e}")
        _LOADED[(str(path), stamp)] = got
    return got


# ----------------------------------------------------------------------------------------------- build

def from_cache_entry(entry: Mapping[str, Any], commit: str = "", date: str = "",
                     libtpu: str = "") -> TableEntry:
    """A table entry from a tuning cache entry (tune/cache.py's JSON); TableError when it is not one."""
    try:
        key = dict(entry["key"])
        versions = {k: str(v) for k, v in dict(key.get("versions") or {}).items()}
        if libtpu:
            versions["libtpu"] = libtpu
        raw = {"backend": key["backend"], "impl": key["impl"], "case": dict(key["case"]), "blocks": entry["blocks"],
               "best_s": entry["best_s"], "default_s": entry.get("default_s"), "clock": entry.get("clock", ""),
               "space": entry.get("space", ""), "check": entry.get("check", ""), "commit": commit,
               "date": date or str(entry.get("created", ""))[:10], "versions": versions}
    except (KeyError, TypeError, ValueError) as e:
        raise TableError(f"not a tuning cache entry ({e})") from None
    return TableEntry.from_json(raw)


def usable(entry: Mapping[str, Any]) -> str:
    """Why a cache entry is not shipped (empty: it is): the search disagreed with its own re-timing, or it
    predates entry version 3 (pooled timings)."""
    if dict(entry.get("key") or {}).get("version") != ENTRY_VERSION:
        return f"entry version {dict(entry.get('key') or {}).get('version')!r}, not {ENTRY_VERSION}"
    if str(entry.get("check", "")).startswith("disagrees"):
        return "its search disagreed with its re-timing"
    return ""


@dataclass
class Built:
    """What ``build`` made: the table, and a line per cache file left out."""

    table: Table
    left_out: list[str]


def build(sources: Iterable[Path | str], *, device_kind: str = "", commit: str = "", date: str = "",
          libtpu: str = "") -> Built:
    """A table from ``sources`` in order (a later one wins a key): tune-cache folders (their entries tagged
    ``commit``, ``date`` (else each entry's own day) and ``libtpu``) and table files (kept as they are).
    ``device_kind``: the chip (else the one chip the sources hold, by the first source's name for it; TableError
    when they hold several)."""
    found: dict[str, tuple[str, TableEntry]] = {}  # key -> (device kind, entry)
    kinds: dict[str, None] = {}
    left: list[str] = []
    for src in sources:
        src = Path(src)
        if src.is_dir():
            items = []
            for p in sorted(src.glob("*.json")):
                try:
                    raw = cache.read_json(p)
                    why = usable(raw)
                    kind = str(dict(raw["key"])["device_kind"])
                    if why:
                        left.append(f"{p.name}: {why}")
                        continue
                    items.append((kind, from_cache_entry(raw, commit, date, libtpu), str(raw.get("created", ""))))
                except (OSError, ValueError, TypeError, KeyError) as e:
                    left.append(f"{p.name}: {e}")
            # within a folder, a key's entry is the one at the largest batch, then the newest
            items.sort(key=lambda x: (x[1].batch or 0, x[2]))
            pairs = [(k, e) for k, e, _ in items]
        elif src.is_file():
            t = read_table(src)
            pairs = [(t.device_kind, e) for e in t.entries]
        else:
            raise TableError(f"{src}: no such folder or table file")
        for kind, e in pairs:
            kinds[kind] = None
            if not device_kind or same_chip(kind, device_kind):
                found[e.key_text()] = (kind, e)
    # one chip under either framework's name (JAX's 'TPU v5 lite', TorchTPU's 'TPU v5e'): the first source's
    first = next(iter(kinds), "")
    chosen = device_kind or (first if all(same_chip(k, first) for k in kinds) else "")
    if not chosen:
        raise TableError(("the sources hold no entries" if not kinds else
                          f"the sources hold several device kinds ({', '.join(kinds)}): pick one"))
    entries = tuple(e for k, e in found.values() if same_chip(k, chosen))
    return Built(Table(chosen, entries), left)
