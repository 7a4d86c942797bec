"""``xlabench history`` as a user runs it: add (idempotent, conflicts refused), rebuild, changes (table and
JSON), html (escaped, offline); bad input and bad stores give one error line and exit 2; the site in a real
headless Chromium: no console error, no network request, the trend chart drawn."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

import _history_data as hd
from conftest import run_cli

EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def creep(tmp_path_factory) -> Path:
    """results/attention/: the creeping slowdown's 30 runs, every note holding a script tag."""
    d = tmp_path_factory.mktemp("creep")
    hd.write_series(d / "results" / "attention", hd.creeping(), note=EVIL)
    return d


def _one_error(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


@pytest.mark.slow  # starts a process
def test_add_changes_json_html_rebuild(creep, tmp_path):
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    runs = sorted((creep / "results" / "attention").glob("*-h1st.csv"))
    r = run_cli("history", "add", *map(str, runs[:10]), "--history", url)
    assert r.returncode == 0 and "10 run(s) added, 0 already recorded" in r.stdout, r.stderr
    r = run_cli("history", "add", str(creep / "results"), "--history", url)
    assert r.returncode == 0 and "20 run(s) added, 10 already recorded" in r.stdout, r.stderr
    out = tmp_path / "changes.json"
    r = run_cli("history", "changes", "--history", url, "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "suite geometric mean" in r.stdout and "attention" in r.stdout
    changes = json.loads(out.read_text())
    suite = [c for c in changes["changes"] if c["case_id"] == "geomean"][0]
    assert abs(suite["position"] - 20) <= 1
    assert {"case_id", "last_good", "first_bad", "ratio", "low", "high", "p", "p_holm"} <= set(suite)
    assert suite["first_bad"] == f"c{suite['position']:09d}" and suite["low"] < suite["ratio"] < suite["high"]
    # rebuild from the files: the same store, the same changes
    r = run_cli("history", "rebuild", str(creep / "results"), "--history", url)
    assert r.returncode == 0 and "from 30 run(s)" in r.stdout, r.stderr
    again = tmp_path / "again.json"
    assert run_cli("history", "changes", "--history", url, "--json", str(again)).returncode == 0
    assert json.loads(again.read_text()) == changes
    site = tmp_path / "site"
    r = run_cli("history", "html", "--history", url, "-o", str(site))
    assert r.returncode == 0, r.stderr
    pages = [p.read_text() for p in site.glob("*.html")]
    assert len(pages) == 2
    for page in pages:
        assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert "https://" not in page
    suite_page = next(p for p in pages if "Cases (48)" in p)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in suite_page
    assert suite_page.count('class="multiple"') == 48 and 'class="mfu"' in suite_page
    assert (site / "runs" / runs[-1].name).exists()  # the newest run's CSV, linked


@pytest.mark.slow  # starts a process
def test_many_cases_at_one_commit_are_one_event(tmp_path):
    """The issue's 8% step: 30 runs of the real run's 24 naive cases, each 8% slower from run 21 on (1%
    noise): one event at commit 20 in the table, the JSON and the site, the 24 cases beneath it."""
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    hd.write_series(tmp_path / "runs", [1.0] * 20 + [1.08] * 10, seed=3, impl="naive")
    assert run_cli("history", "add", str(tmp_path / "runs"), "--history", url).returncode == 0
    out = tmp_path / "c.json"
    r = run_cli("history", "changes", "--history", url, "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "24 of 24 cases changed at commit c000000020 (last good c000000019)" in r.stdout
    doc = json.loads(out.read_text())
    (ev,) = doc["events"]
    assert ev["first_bad"] == "c000000020" and ev["cases"] == 24 and len(ev["case_ids"]) == 24
    assert 1.06 < ev["low"] <= ev["ratio"] <= ev["high"] < 1.10
    in_event = [c for c in doc["changes"] if c["event"] == 0]
    assert sorted(c["case_id"] for c in in_event) == ev["case_ids"]
    assert run_cli("history", "html", "--history", url, "-o", str(tmp_path / "site")).returncode == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert "24 of 24 (24 slower)" in index and "<code>c000000020</code>" in index
    r = run_cli("history", "changes", "--history", url, "--family", "t-test")
    assert r.returncode == 2 and "--family" in r.stderr


@pytest.mark.slow  # starts a process
def test_same_run_id_other_content_exits_2(creep, tmp_path):
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    first = sorted((creep / "results" / "attention").glob("*-h1st.csv"))[0]
    assert run_cli("history", "add", str(first), "--history", url).returncode == 0
    other = hd.write_series(tmp_path / "other", [2.0], n_cases=3)[0]
    line = _one_error(run_cli("history", "add", str(other), "--history", url))
    assert first.stem in line and "different content" in line


@pytest.mark.slow  # starts a process
def test_bad_inputs_exit_2_with_one_line(creep, tmp_path):
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("a,b\n1,2\n")
    assert "not an xlabench results CSV" in _one_error(run_cli("history", "add", str(foreign), "--history", url))
    src = sorted((creep / "results" / "attention").glob("*-h1st.csv"))[0]
    old = tmp_path / "old.csv"
    text = src.read_text().splitlines()
    old.write_text("\n".join([text[0]] + ["9" + ln[1:] for ln in text[1:]]) + "\n")  # schema_version 9
    shutil.copyfile(src.with_name(src.stem + ".samples.csv"), tmp_path / "old.samples.csv")
    assert "schema version [9]" in _one_error(run_cli("history", "add", str(old), "--history", url))
    assert "no such file" in _one_error(run_cli("history", "add", str(tmp_path / "nope.csv"), "--history", url))
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(os.urandom(8192))
    assert "not an xlabench history store" in _one_error(
        run_cli("history", "add", str(src), "--history", f"sqlite:///{corrupt}"))
    foreign_db = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign_db).execute("CREATE TABLE t (x)")
    assert "no xlabench_meta" in _one_error(run_cli("history", "changes", "--history", f"sqlite:///{foreign_db}"))
    assert run_cli("history", "add", str(src), "--history", url).returncode == 0
    con = sqlite3.connect(tmp_path / "h.sqlite")
    con.execute("UPDATE xlabench_meta SET value = '7' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    assert "newer than this xlabench's" in _one_error(run_cli("history", "changes", "--history", url))
    assert "expected sqlite:///PATH or postgresql://" in _one_error(
        run_cli("history", "changes", "--history", "mysql://x"))
    assert "no such history store" in _one_error(
        run_cli("history", "changes", "--history", f"sqlite:///{tmp_path / 'none.sqlite'}"))


@pytest.mark.slow  # starts a process
def test_postgres_add_and_changes(postgres_server, creep, tmp_path):
    import _postgres

    history_url = _postgres.fresh_database(postgres_server, "cli_add_changes")
    r = run_cli("history", "add", str(creep / "results"), "--history", history_url)
    assert r.returncode == 0 and "30 run(s) added" in r.stdout, r.stderr
    out = tmp_path / "c.json"
    assert run_cli("history", "changes", "--history", history_url, "--json", str(out)).returncode == 0
    suite = [c for c in json.loads(out.read_text())["changes"] if c["case_id"] == "geomean"][0]
    assert abs(suite["position"] - 20) <= 1


# -------------------------------------------------------------------------------- a real browser

CHROMIUM_HOSTS = ("google.com", "googleapis.com", "gstatic.com", "gvt1.com", "gvt2.com")  # the browser's own requests


class _Proxy:
    """An HTTP proxy that answers nothing and records the host of every request the browser makes."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.hosts: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    first = conn.recv(4096).decode(errors="replace").split("\r\n")[0]
                except OSError:
                    continue
                if not first.strip():  # a preconnect closed before any request: no host was asked for
                    continue
                target = first.split(" ")[1] if " " in first else first
                self.hosts.append(target.split("://")[-1].split("/")[0].split(":")[0])

    def page_hosts(self) -> list[str]:
        return [h for h in self.hosts if not h.endswith(CHROMIUM_HOSTS)]


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium not found in CI: .ci/run installs the chromium package")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return exe


def _browse(page: Path, tmp_path: Path, *extra: str) -> tuple[str, str, list[str]]:
    """(DOM after load, browser log, hosts the page asked the network for) of a headless load from disk."""
    proxy = _Proxy()
    args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-default-apps",
            f"--user-data-dir={tmp_path / 'profile'}", f"--proxy-server=127.0.0.1:{proxy.port}",
            "--proxy-bypass-list=<-loopback>", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000",
            *extra, page.as_uri()]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    proxy.sock.close()
    return r.stdout, r.stderr, proxy.page_hosts()


def test_the_proxy_records_requests_not_bare_connections():
    """Chromium opens speculative connections to the proxy and closes some unused: those are no request."""
    proxy = _Proxy()
    socket.create_connection(("127.0.0.1", proxy.port)).close()
    with socket.create_connection(("127.0.0.1", proxy.port)) as s:
        s.sendall(b"GET http://example.invalid/a.png HTTP/1.1\r\nHost: example.invalid\r\n\r\n")
        s.settimeout(10)
        s.recv(1)  # the proxy closes without an answer once it has read the request
    proxy.sock.close()
    assert proxy.page_hosts() == ["example.invalid"]


def test_the_harness_sees_console_errors_and_requests(tmp_path):
    """The control: a page with a console error and a remote image is caught by both checks."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><p>x</p><script>console.error("boom")</script>'
                   '<img src="http://example.invalid/a.png">')
    _, log, hosts = _browse(bad, tmp_path, "--dump-dom")
    assert "CONSOLE" in log and "boom" in log
    assert "example.invalid" in hosts


@pytest.mark.slow  # starts a process
def test_the_site_in_headless_chromium(creep, tmp_path):
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert run_cli("history", "add", str(creep / "results"), "--history", url).returncode == 0
    site = tmp_path / "site"
    assert run_cli("history", "html", "--history", url, "-o", str(site)).returncode == 0
    page = next(p for p in site.glob("*.html") if p.name != "index.html")
    for p in (site / "index.html", page):
        dom, log, hosts = _browse(p, tmp_path, "--dump-dom")
        assert "CONSOLE" not in log, log
        assert hosts == []
        assert "<script" not in dom and "svg" in dom
    assert EVIL.replace("<", "&lt;").replace(">", "&gt;") in dom  # the note, shown as text
    shot = tmp_path / "shot.png"
    _, log, hosts = _browse(page, tmp_path, f"--screenshot={shot}", "--window-size=1200,900",
                            "--hide-scrollbars")
    assert hosts == [] and shot.exists()
    from matplotlib import image

    img = (image.imread(shot)[..., :3] * 255).round().astype(int)
    # The trend chart: its line (#1f5fa8) spans most of its 760 px width in the top 320 px; the change mark
    # (#b00020) is drawn inside it.
    top = img[:320]
    blue = np.argwhere((np.abs(top - [31, 95, 168]).sum(axis=-1) < 40))
    assert len(blue) > 500
    assert blue[:, 1].max() - blue[:, 1].min() > 550 and blue[:, 0].max() - blue[:, 0].min() > 60
    red = np.argwhere((np.abs(top - [176, 0, 32]).sum(axis=-1) < 60))
    assert len(red) > 30 and blue[:, 1].min() < red[:, 1].mean() < blue[:, 1].max()


def test_add_skips_the_samples_files_a_glob_picks_up(tmp_path):
    """`history add results/attention/2026*.csv` also matches each run's .samples.csv: a note per file, as
    report gives, and every run recorded (it refused them with exit 2 after recording part of the runs)."""
    from click.testing import CliRunner

    from xlabench.cli import main

    runs = hd.write_series(tmp_path / "results" / "attention", [1.0, 1.0, 1.0])
    globbed = sorted(str(p) for p in (tmp_path / "results" / "attention").glob("*.csv"))
    assert any(p.endswith(".samples.csv") for p in globbed)
    store = f"sqlite:///{tmp_path / 'h.sqlite'}"
    res = CliRunner().invoke(main, ["history", "add", "--history", store, *globbed])
    assert res.exit_code == 0, res.output
    assert f"{len(runs)} run(s) added" in res.output
    notes = [ln for ln in res.output.splitlines() if ln.startswith("note: skipped") and ".samples.csv" in ln]
    assert len(notes) == len(runs), res.output
    assert "a samples file (read with its run" in notes[0]
