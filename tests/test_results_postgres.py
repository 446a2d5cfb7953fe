"""The results database on a real PostgreSQL server that this module starts (Debian's ``postgresql``:
initdb and pg_ctl into a private folder, a Unix socket only, run as an unprivileged user when the tests
run as root): real ``nvdla-hil regress`` runs on the model target with an injected bug and on the serial
target through the board emulator are recorded there, a label returns with the failure, a killed run
is interrupted, past run directories import, and history and the dashboard read it.

Oracle of the failures: the reference model against the model with SDP.D_CVT_OFFSET.CVT_OFFSET
decoded one too high (harness/targets/faults.py)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest


from nvdla_hil.harness.cli import main

pytestmark = pytest.mark.slow  # a real PostgreSQL server: `make test-slow`, CI's second step

BUG = "SDP.D_CVT_OFFSET.CVT_OFFSET+1"
K = "sdp_3x3x33_bn_int8_reg_0 or sdp_3x3x33_bn_int8_mem_0 or cdp_8x8x32_lrn3_int8_0"
ENV_KEYS = ("NVDLA_HIL_RESULTS_DB", "NVDLA_HIL_RESULTS", "NVDLA_HIL_TARGET", "NVDLA_HIL_CONFIG", "NVDLA_HIL_LAB",
            "NVDLA_HIL_BOARD")


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A private PostgreSQL server (socket in its own folder); yields a SQLAlchemy-style URL."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install nvdla-hil[results])")
    root = Path(tempfile.mkdtemp(prefix="nvdla-hil-pg-"))
    data = root / "data"
    data.mkdir()
    user_cmd: list[str] = []
    user = os.environ.get("USER") or "postgres"
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        runuser = shutil.which("runuser")
        if not runuser:
            pytest.skip("running as root without runuser: cannot start PostgreSQL as an unprivileged user")
        os.chmod(root, 0o755)
        shutil.chown(data, "nobody")
        user_cmd, user = [runuser, "-u", "nobody", "--"], "nobody"
    else:
        import getpass

        user = getpass.getuser()
    port = _free_port()
    try:
        subprocess.run([*user_cmd, initdb, "-D", str(data), "-A", "trust", "-U", user, "--no-sync"], check=True,
                       capture_output=True, timeout=120)
        subprocess.run([*user_cmd, pg_ctl, "-D", str(data), "-l", str(data / "server.log"), "-w", "-t", "60", "-o",
                        f"-k {data} -p {port} -c listen_addresses='' -c fsync=off", "start"], check=True,
                       capture_output=True, timeout=120)
    except subprocess.CalledProcessError as e:
        shutil.rmtree(root, ignore_errors=True)
        raise AssertionError(f"could not start PostgreSQL: {e.stderr.decode(errors='replace')}") from None
    import psycopg

    with psycopg.connect(host=str(data), port=port, user=user, dbname="postgres", autocommit=True) as conn:
        conn.execute("CREATE DATABASE nvdla")
        conn.execute("CREATE DATABASE imported")
        conn.execute("CREATE DATABASE killed")
    try:
        yield f"postgresql://{user}@/nvdla?host={data}&port={port}"
    finally:
        subprocess.run([*user_cmd, pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def _main(argv: list[str]) -> tuple[int, str]:
    buf = StringIO()
    with redirect_stdout(buf), redirect_stderr(buf):
        code = main(argv)
    return code, buf.getvalue()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)


LAB = """\
lock_dir: {lock}
boards:
  emu:
    url: {url}
    baud: 3000000
    profile: nv_small
    integrity: verify
    reset_address: 0xf0000000
"""


def test_runs_labels_import_and_dashboard_on_postgresql(pg_url: str, trace_root: Path, tmp_path: Path) -> None:
    from nvdla_hil.drivers.uartbone import BoardMap
    from nvdla_hil.harness.boards.emulator import serve_in_thread
    from nvdla_hil.harness.results.analysis import load_history
    from nvdla_hil.harness.results.db import ResultsDB
    from nvdla_hil.harness.targets.model import ModelTarget

    results = tmp_path / "results"
    base = ["regress", "--suite", "traces", "--traces", str(trace_root), "--poison", "--results-dir", str(results),
            "--results-db", pg_url]
    code, first = _main([*base, "-k", K, "--model-bug", BUG])
    assert code == 1 and "failure clusters: 2 failures in 1 cluster(s)" in first
    with ResultsDB(pg_url) as db:
        assert db.engine.dialect.name == "postgresql"
        (run,) = db.runs()
        sig = next(t["signature"] for t in db.tests_of([run["id"]]) if t["signature"])
    code, out = _main(["history", "--results-db", pg_url, "label", sig, "--text", "CVT offset +1", "--bug", "https://bugs.example/2"])
    assert code == 0 and f"labelled {sig}" in out
    code, again = _main([*base, "-k", K, "--model-bug", BUG])
    assert code == 1 and "known: CVT offset +1 (https://bugs.example/2)" in again
    code, _ = _main([*base, "-k", K])
    assert code == 0
    # two serial runs through the board emulator (the model behind a real TCP byte stream)
    with serve_in_thread(ModelTarget("nv_small"), BoardMap(), mode="tcp") as emu:
        lab = tmp_path / "lab.yaml"
        lab.write_text(LAB.format(lock=tmp_path, url=emu.url))
        serial = [*base, "--target", "serial", "--lab", str(lab), "--board", "emu", "-k",
                  "cdp_8x8x32_lrn3_int8_0 or sdp_3x3x33_bn_int8_mem_0"]
        assert _main(serial)[0] == 0
        assert _main(serial)[0] == 0
    with ResultsDB(pg_url) as db:
        h = load_history(db)
    assert [r["target"] for r in h.runs] == ["serial", "serial", "model", "model", "model"]
    assert all(r["status"] == "complete" for r in h.runs)
    assert [(r["n_passed"], r["n_failed"]) for r in h.runs] == [(2, 0), (2, 0), (3, 0), (1, 2), (1, 2)]
    assert h.runs[0]["build_key"] == "board:emu"
    # the clean run is another series than the runs with the injected bug (harness/results/analysis.py):
    # the second bug run against the first is "still failing", same cluster
    again_run, clean = h.runs[3], h.runs[2]
    assert h.compare(clean).previous is None and len(h.compare(again_run).still) == 2
    (cl,) = h.clusters([r["id"] for r in h.runs])
    assert cl["count"] == 4 and cl["label"]["text"] == "CVT offset +1"
    code, out = _main(["history", "--results-db", pg_url, "--run", again_run["id"][:20]])
    assert code == 0 and "still failing (2):" in out and "known: CVT offset +1" in out
    code, out = _main(["dashboard", "--results-db", pg_url, "--out", str(tmp_path / "site")])
    page = (tmp_path / "site" / "index.html").read_text()
    assert code == 0 and 'data-count="4"' in page and "CVT offset +1" in page
    # the same run directories imported into another database of the server
    other = pg_url.replace("/nvdla?", "/imported?")
    code, out = _main(["history", "--results-db", other, "import", str(results)])
    assert code == 0 and "5 run(s) imported" in out
    with ResultsDB(other) as db:
        got = {r["id"]: (r["target"], r["n_passed"], r["n_failed"], r["status"]) for r in db.runs()}
    assert got == {r["id"]: (r["target"], r["n_passed"], r["n_failed"], r["status"]) for r in h.runs}


def test_a_killed_run_is_interrupted_on_postgresql(pg_url: str, trace_root: Path, tmp_path: Path) -> None:
    import sys
    import time

    from nvdla_hil.harness.results.analysis import load_history
    from nvdla_hil.harness.results.db import ResultsDB

    url = pg_url.replace("/nvdla?", "/killed?")  # a database of its own
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    proc = subprocess.Popen([sys.executable, "-m", "nvdla_hil.harness.cli", "regress", "--suite", "traces", "--traces",
                             str(trace_root), "--results-dir", str(tmp_path / "r"), "--results-db", url,
                             "--model-bug", BUG, "-k", "sdp_ or cdp_"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        rid = None
        deadline = time.monotonic() + 300
        with ResultsDB(url) as db:
            before = {r["id"] for r in db.runs()}
            while rid is None and time.monotonic() < deadline and proc.poll() is None:
                new = [r for r in db.runs() if r["id"] not in before]
                if new and db.tests_of([new[0]["id"]]):
                    rid = new[0]["id"]
                time.sleep(0.5)
        assert rid is not None, "the run recorded no result"
        proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    with ResultsDB(url) as db:
        run = load_history(db).run_by_id(rid)
    assert run["status"] == "interrupted" and "killed" in run["note"]
