"""The history store: every run, its cases' metrics and raw samples, in SQLite (a file beside the results,
no server) or PostgreSQL (a team's shared store) through the same SQL, with a schema version and migrations.

Writes are one transaction per run, so a kill -9 mid-add leaves the run wholly absent; SQLite runs in WAL
mode with a busy timeout and takes the write lock at the start of the transaction (``BEGIN IMMEDIATE``), so
concurrent writers queue instead of failing; PostgreSQL serialises them on the run_id primary key.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

DEFAULT_URL = "sqlite:///results/history.sqlite"
KIND = "xlabench-history"
BUSY_TIMEOUT_S = 120.0
_sleep, _monotonic = time.sleep, time.monotonic  # the tests' fake clock replaces these

# Migration i takes a store from version i to i + 1 (statements valid in both SQLite and PostgreSQL).
MIGRATIONS: list[list[str]] = [
    [  # 1: runs, cases, one row per (run, case) with its metrics and raw samples as JSON
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY, suite TEXT NOT NULL, profile TEXT, git_sha TEXT, commit_time TEXT,
            started TEXT, device_kind TEXT, framework_version TEXT, platform TEXT, hostname TEXT,
            digest TEXT NOT NULL, source TEXT, meta TEXT)""",
        """CREATE TABLE cases (
            case_id TEXT PRIMARY KEY, workload TEXT, backend TEXT, impl TEXT, params TEXT NOT NULL)""",
        """CREATE TABLE results (
            run_id TEXT NOT NULL REFERENCES runs(run_id), case_id TEXT NOT NULL REFERENCES cases(case_id),
            status TEXT NOT NULL, median_s DOUBLE PRECISION, metrics TEXT NOT NULL, samples TEXT NOT NULL,
            PRIMARY KEY (run_id, case_id))""",
        "CREATE INDEX results_case ON results (case_id)",
        "CREATE INDEX runs_suite ON runs (suite, device_kind, framework_version)",
    ],
    [  # 2: the commit's subject line (shown, escaped, on the page)
        "ALTER TABLE runs ADD COLUMN commit_message TEXT",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)

RUN_FIELDS = ("run_id", "suite", "profile", "git_sha", "commit_time", "started", "device_kind",
              "framework_version", "platform", "hostname", "digest", "source", "meta", "commit_message")


class HistoryError(Exception):
    """The store or an input cannot be used (message names the store or file and what is wrong: exit 2)."""


@dataclass
class CaseResult:
    """One case of one run: its parameters, status, metrics (schema columns) and raw samples in seconds."""

    case_id: str
    workload: str
    backend: str
    impl: str
    params: dict[str, Any]
    status: str
    median_s: Optional[float]
    metrics: dict[str, Any]
    samples: list[float]


@dataclass
class RunRecord:
    """One run as the store keeps it; ``digest`` is a hash of its content (same run id, same digest)."""

    run_id: str
    suite: str
    digest: str
    profile: str = ""
    git_sha: str = ""
    commit_time: Optional[str] = None
    started: Optional[str] = None
    device_kind: str = ""
    framework_version: str = ""
    platform: str = ""
    hostname: str = ""
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    commit_message: str = ""
    cases: list[CaseResult] = field(default_factory=list)

    def row(self) -> tuple[Any, ...]:
        values = {f: getattr(self, f) for f in RUN_FIELDS}
        values["meta"] = json.dumps(self.meta, sort_keys=True, default=str)
        return tuple(values[f] for f in RUN_FIELDS)


def sqlite_path(url: str) -> Optional[Path]:
    """The file of a ``sqlite:///PATH`` URL (``sqlite:////abs`` is absolute), None for another scheme."""
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):])
    if "://" not in url:
        return Path(url)
    return None


class Store:
    """A connection to a history store (open with :func:`open_store`)."""

    def __init__(self, conn: Any, url: str, dialect: str):
        self.conn = conn
        self.url = url
        self.dialect = dialect

    # -- plumbing -------------------------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cur = self.conn.cursor()
        cur.execute(self._sql(sql), tuple(params))
        return cur

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.execute(sql, params).fetchall())

    def _begin(self) -> None:
        self.execute("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")

    def _rollback(self) -> None:
        try:
            self.execute("ROLLBACK")
        except Exception:  # no transaction open: nothing to undo
            pass

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ---------------------------------------------------------------------------------------
    def _tables(self) -> set[str]:
        if self.dialect == "sqlite":
            rows = self.query("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            rows = self.query("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        return {r[0] for r in rows}

    def version(self) -> int:
        """The store's schema version (0: empty, nothing created yet); raises HistoryError for a foreign one."""
        tables = self._tables()
        if "xlabench_meta" not in tables:
            if tables:
                raise HistoryError(f"{self.url}: not an xlabench history store (it has tables "
                                   f"{', '.join(sorted(tables)[:5])} but no xlabench_meta)")
            return 0
        meta = dict(self.query("SELECT key, value FROM xlabench_meta"))
        if meta.get("kind") != KIND:
            raise HistoryError(f"{self.url}: not an xlabench history store (xlabench_meta kind is {meta.get('kind')!r})")
        try:
            return int(meta["schema_version"])
        except (KeyError, ValueError):
            raise HistoryError(f"{self.url}: xlabench_meta has no valid schema_version") from None

    def migrate(self, target: int = SCHEMA_VERSION) -> int:
        """Bring the store to ``target`` (creating it when empty), under the write lock; returns the old version."""
        self._begin()
        try:
            if self.dialect == "postgresql":  # one migrator at a time across processes
                self.execute("SELECT pg_advisory_xact_lock(7242024)")
            old = self.version()
            if old > SCHEMA_VERSION:
                raise HistoryError(f"{self.url}: store schema version {old} is newer than this xlabench's "
                                   f"({SCHEMA_VERSION}): upgrade xlabench to use it")
            if old == 0:
                self.execute("CREATE TABLE xlabench_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                self.execute("INSERT INTO xlabench_meta VALUES ('kind', ?)", (KIND,))
                self.execute("INSERT INTO xlabench_meta VALUES ('schema_version', '0')")
            for v in range(old, target):
                for stmt in MIGRATIONS[v]:
                    self.execute(stmt)
            if target > old:
                self.execute("UPDATE xlabench_meta SET value = ? WHERE key = 'schema_version'", (str(target),))
            self.execute("COMMIT")
            return old
        except BaseException:
            self._rollback()
            raise

    # -- runs -----------------------------------------------------------------------------------------
    def digest_of(self, run_id: str) -> Optional[str]:
        rows = self.query("SELECT digest FROM runs WHERE run_id = ?", (run_id,))
        return rows[0][0] if rows else None

    def add(self, run: RunRecord) -> bool:
        """Record a run in one transaction: True if added, False if this exact run is already there.

        Raises HistoryError when the store holds the run id with other content."""
        for attempt in range(2):
            self._begin()
            try:
                have = self.digest_of(run.run_id)
                if have is None:
                    self._insert(run)
                self.execute("COMMIT")
            except BaseException as e:
                self._rollback()
                if attempt == 0 and _is_unique_violation(e):  # another writer added it first: compare
                    continue
                raise
            break
        if have is not None and have != run.digest:
            raise HistoryError(f"{run.source or run.run_id}: run {run.run_id} is already in {self.url} with "
                               "different content (a run id names one run: re-running needs a new id)")
        return have is None

    def _insert(self, run: RunRecord) -> None:
        cols = ", ".join(RUN_FIELDS)
        marks = ", ".join("?" for _ in RUN_FIELDS)
        self.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", run.row())
        cur = self.conn.cursor()
        conflict = " ON CONFLICT (case_id) DO NOTHING"
        cur.executemany(self._sql("INSERT INTO cases VALUES (?, ?, ?, ?, ?)" + conflict),
                        [(c.case_id, c.workload, c.backend, c.impl, json.dumps(c.params, sort_keys=True, default=str))
                         for c in run.cases])
        cur.executemany(self._sql("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)"),
                        [(run.run_id, c.case_id, c.status, c.median_s, json.dumps(c.metrics, default=str),
                          json.dumps(c.samples)) for c in run.cases])

    def replace_all(self, runs: Sequence[RunRecord]) -> None:
        """Make the store hold exactly these runs (``history rebuild``), in one transaction: a rebuild
        killed midway leaves the old store."""
        ids = [r.run_id for r in runs]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise HistoryError(f"run {dup} is in more than one file: {', '.join(r.source for r in runs if r.run_id == dup)}")
        self._begin()
        try:
            for table in ("results", "cases", "runs"):
                self.execute(f"DELETE FROM {table}")
            for r in runs:
                self._insert(r)
            self.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def runs(self, suite: Optional[str] = None) -> list[dict[str, Any]]:
        """Every run (optionally of one suite) as a dict of the run fields, meta decoded."""
        sql = f"SELECT {', '.join(RUN_FIELDS)} FROM runs" + (" WHERE suite = ?" if suite else "")
        out = []
        for r in self.query(sql, (suite,) if suite else ()):
            d = dict(zip(RUN_FIELDS, r))
            d["meta"] = json.loads(d["meta"] or "{}")
            out.append(d)
        return out

    def results(self, run_ids: Sequence[str]) -> Iterator[tuple[str, str, str, Optional[float], str]]:
        """(run_id, case_id, status, median_s, samples JSON) of the given runs."""
        ids = list(run_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ", ".join("?" for _ in chunk)
            yield from self.query("SELECT run_id, case_id, status, median_s, samples FROM results "
                                  f"WHERE run_id IN ({marks})", chunk)

    def cases(self) -> dict[str, dict[str, Any]]:
        """case_id -> workload, backend, impl and its parameters."""
        return {cid: {"workload": w, "backend": b, "impl": i, "params": json.loads(p)}
                for cid, w, b, i, p in self.query("SELECT case_id, workload, backend, impl, params FROM cases")}

    def metrics(self, run_id: str) -> dict[str, dict[str, Any]]:
        """case_id -> the metrics of one run's cases (its status included)."""
        return {cid: {**json.loads(m), "status": st}
                for cid, st, m in self.query("SELECT case_id, status, metrics FROM results WHERE run_id = ?", (run_id,))}


def _is_unique_violation(e: BaseException) -> bool:
    return isinstance(e, sqlite3.IntegrityError) or type(e).__name__ == "UniqueViolation"


def open_store(url: str = DEFAULT_URL, create: bool = True) -> Store:
    """Open (and create or migrate) the store at ``url``: ``sqlite:///PATH`` or ``postgresql://...``.

    Raises HistoryError for a file that is not a database, a foreign database, a store of a newer
    schema version, an unreachable server, or (``create=False``) a store that does not exist."""
    path = sqlite_path(url)
    if path is not None:
        store = _open_sqlite(path, url, create)
    elif url.startswith(("postgresql://", "postgres://")):
        store = _open_postgres(url)
    else:
        raise HistoryError(f"--history {url}: expected sqlite:///PATH or postgresql://...")
    try:
        if store.version() != SCHEMA_VERSION:
            store.migrate()
    except HistoryError:
        store.close()
        raise
    except Exception as e:  # the driver's own error for a damaged database
        store.close()
        raise HistoryError(f"{url}: cannot read the store: {e}") from None
    return store


def _open_sqlite(path: Path, url: str, create: bool) -> Store:
    if not path.exists():
        if not create:
            raise HistoryError(f"{url}: no such history store (xlabench history add creates it)")
    elif path.is_dir():
        raise HistoryError(f"{url}: is a directory, not a history store file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as e:
        raise HistoryError(f"{url}: cannot open {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        mode = _while_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        if mode.lower() != "wal":
            raise HistoryError(f"{url}: cannot switch the store to WAL mode (journal mode {mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.OperationalError as e:  # a read-only file or folder, a full disk
        conn.close()
        raise HistoryError(f"{url}: cannot write {path}: {e}") from None
    except sqlite3.DatabaseError as e:
        conn.close()
        raise HistoryError(f"{url}: not an xlabench history store ({e})") from None
    return Store(conn, url, "sqlite")


def _while_busy(step: Any) -> Any:
    """``step()``, retried while SQLite answers "database is locked", for up to BUSY_TIMEOUT_S.

    SQLite's busy timeout does not cover a connection that holds a read lock and asks for the write lock
    that another holds: it answers at once, to avoid a deadlock. ``PRAGMA journal_mode = WAL`` does just
    that on a store another process is creating, so two first ``history add`` runs at once would fail."""
    deadline, wait = _monotonic() + BUSY_TIMEOUT_S, 0.005
    while True:
        try:
            return step()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or _monotonic() >= deadline:
                raise
        _sleep(wait)
        wait = min(2 * wait, 0.25)


def _open_postgres(url: str) -> Store:
    try:
        import psycopg
    except ImportError:
        raise HistoryError(f"{url}: PostgreSQL stores need psycopg: pip install 'xlabench[history-pg]'") from None
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=30)
    except psycopg.Error as e:
        raise HistoryError(f"{url}: cannot connect: {str(e).strip().splitlines()[0]}") from None
    return Store(conn, url, "postgresql")
