"""The host's last-level cache size, read portably without a framework: Linux sysfs
(/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}), else the C library's sysconf, else macOS's
sysctl. A CPU run records it in its meta (env.llc_bytes), so the audit of its rows can tell a working set
served from the cache (its MBU may exceed the stream bandwidth) on any later host."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Optional

from xlabench.units import BINARY_SUFFIX

SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


def parse_size(text: str) -> Optional[int]:
    """'32768K', '1M', '1048576' -> bytes (None when not a size)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, flags=re.IGNORECASE)
    return int(m.group(1)) * BINARY_SUFFIX[m.group(2).upper()] if m else None


def _from_sysfs(root: Path) -> Optional[int]:
    best: Optional[tuple[int, int]] = None
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Unified", "Data") and size and (best is None or level > best[0]):
            best = (level, size)
    return best[1] if best else None


def _from_sysconf() -> Optional[int]:
    for name in ("SC_LEVEL4_CACHE_SIZE", "SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if size and size > 0:
            return int(size)
    return None


def _from_sysctl() -> Optional[int]:
    for key in ("hw.l3cachesize", "hw.l2cachesize"):
        try:
            out = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        size = parse_size(out.strip()) if out.strip() else None
        if size:
            return size
    return None


def llc_bytes(root: Path = SYSFS) -> Optional[int]:
    """The last-level cache of the host in bytes (the highest-level data or unified cache of cpu 0), or
    None where no source says."""
    return _from_sysfs(root) or _from_sysconf() or _from_sysctl()
