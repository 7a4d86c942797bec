"""A real PostgreSQL server for the history tests: Debian's binaries (``apt-get install postgresql``; .ci/run
installs them), initdb into a temp dir, pg_ctl on a free loopback port, stopped at the end.

As root (CI containers) the server runs as the ``postgres`` user, which initdb requires."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, Optional


def bin_dir() -> Optional[Path]:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server() -> Iterator[str]:
    """Start a throwaway server and yield its URL (a generator for a pytest fixture)."""
    bins = bin_dir()
    if bins is None:
        raise RuntimeError("PostgreSQL binaries not found: apt-get install postgresql (.ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="xlabench-pg-"))
    data = root / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres", "postgres")
        os.chmod(root, 0o700)
    port = _free_port()
    log = root / "server.log"
    subprocess.run(as_user + [str(bins / "initdb"), "-D", str(data), "-U", "xlabench", "--auth=trust",
                              "--no-sync", "-E", "UTF8"], check=True, capture_output=True, timeout=300)
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=50"
    try:
        subprocess.run(as_user + [str(bins / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w",
                                  "-t", "300", "start"], check=True, capture_output=True, timeout=330)
    except subprocess.CalledProcessError:
        raise RuntimeError(f"PostgreSQL did not start: {log.read_text() if log.exists() else ''}") from None
    try:
        subprocess.run([str(bins / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "xlabench", "hist"],
                       check=True, capture_output=True, timeout=120)
        yield f"postgresql://xlabench@127.0.0.1:{port}/hist"
    finally:
        subprocess.run(as_user + [str(bins / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(url: str, name: str) -> str:
    """A new empty database on the server of url (one per test: tests do not see each other's runs)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name
