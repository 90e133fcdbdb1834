"""``weir ui`` as a command: serves the page from a store file, refuses a store that is not there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.cli._support import SRC, run_subprocess
from tests.servers import free_port
from tests.ui.test_ui_browser import dump, store  # noqa: F401 - the fixture
from tests.unit.test_coordinator import TOPO


def test_weir_ui_serves_the_topology_page_from_a_store_file(store: Path) -> None:  # noqa: F811
    before = dump(store)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "weir", "ui", TOPO, "--url", f"sqlite:///{store}", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        page = None
        while page is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:  # noqa: S310
                    page = r.read().decode()
                    final = r.url
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "weir ui did not answer"
                time.sleep(0.2)
        assert final.endswith(f"/t/{TOPO}")  # straight to the topology named on the command line
        assert "Checkpoint timeline" in page and "data-component='count'" in page
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert f"weir ui: http://127.0.0.1:{port}/t/{TOPO}" in err
    assert dump(store) == before


def test_weir_ui_never_creates_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    r = run_subprocess("ui", "--url", f"sqlite:///{missing}", "--port", str(free_port()))
    assert r.code == 2
    assert "no SQLite state store" in r.err
    assert not missing.exists()
