"""``weir ui`` in a real browser: headless Chromium (Debian's package) driven by Selenium.

The store is written by the real coordinator (with the fakes of the coordinator tests, no Spark):
five batches of a word count, one failed attempt (retried), a driver killed while PREPARING and
the recovery of the next one. The test checks what a person sees — the graph's components, the
timeline's txids with the failure and the recovery marked, the key counts, the error with its
traceback — then lets the topology commit another batch and waits for the open page to show it.
A screenshot is written as a test artifact (its path is printed).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import require_service
from tests.unit.test_coordinator import NAMESPACES, TOPO, Crash, JobOutcome, TaskFailure, WordJob
from tests.unit.test_history import HistoryDriver, sqlite_backend
from weir.state.backend import Backend
from weir.ui import StoreReader, UiServer

CHROMIUM = os.environ.get("WEIR_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("WEIR_CHROMEDRIVER", "/usr/bin/chromedriver")
EVIL = "<img src=x id=injected onerror=alert(1)>"

SHAPE = {
    "dialect": "storm",
    "namespaces": NAMESPACES,
    "components": [
        {"id": "lines", "kind": "spout", "class": "FileSpout", "parallelism": 1, "stateful": False, "inputs": []},
        {
            "id": "split",
            "kind": "bolt",
            "class": "SplitSentence",
            "parallelism": 2,
            "stateful": False,
            "inputs": [{"source": "lines", "stream": "default", "grouping": "shuffle", "fields": []}],
        },
        {
            "id": "count",
            "kind": "bolt",
            "class": "WordCount",
            "parallelism": 2,
            "stateful": True,
            "inputs": [{"source": "split", "stream": "default", "grouping": "fields", "fields": ["word"]}],
        },
    ],
}


class CountingJob(WordJob):
    """The coordinator tests' word job, reporting per-component counts like a real batch job."""

    def __call__(self, txid: int, epoch: int, attempt: int) -> JobOutcome:
        out = super().__call__(txid, epoch, attempt)
        if out.ok:
            time.sleep(0.002 * txid)  # batches of different lengths make a readable chart
            out.stats = {
                "tuples_in": 1,
                "components": {
                    "lines": {"in": 1, "out": 1},
                    "split": {"in": 1, "out": 2},
                    "count": {"in": 2, "out": 0},
                },
                "keys_written": {ns: 1 for ns in NAMESPACES},
            }
        else:
            f = out.failures[0]
            out.failures = [TaskFailure(f.component, f.task, f"{f.error} {EVIL}", f.traceback + f"\n{EVIL}")]
        return out


def driver(backend: Backend) -> HistoryDriver:
    d = HistoryDriver(backend)
    d.job = CountingJob(backend, d.log)
    d.coord.shape = SHAPE
    return d.start()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    """Batches 0..4 (txid 3 fails once), a kill while PREPARING txid 6, and the recovery after it."""
    db = tmp_path / "state.db"
    b = sqlite_backend(db)
    try:
        d = driver(b)
        d.job.fail = {(3, 0)}
        for batch in range(5):
            d.batch(batch)
        d.job.crash = 6
        with pytest.raises(Crash):
            d.batch(5)
        driver(b).batch(5)  # a new driver: recovery rolls txid 6 back, then commits it
    finally:
        b.close()
    yield db


def dump(db: Path) -> list[tuple[str, bytes, bytes]]:
    b = sqlite_backend(db)
    try:
        return sorted((ns, k, v) for ns in b.namespaces() for k, v in b.scan(ns))
    finally:
        b.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    require_service(os.path.exists(CHROMIUM), f"{CHROMIUM} is not installed (apt-get install chromium)")
    require_service(os.path.exists(CHROMEDRIVER), f"{CHROMEDRIVER} is not installed (apt-get install chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1900",
    ):
        opts.add_argument(flag)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()


@pytest.fixture
def ui(store: Path) -> Iterator[UiServer]:
    b = sqlite_backend(store)
    server = UiServer(StoreReader(b), port=0, refresh_s=0.5).start()
    try:
        yield server
    finally:
        server.stop()
        b.close()


def wait_for(fn: Any, what: str, timeout: float = 60) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            got = fn()
        except StaleElementReferenceException:  # the page body was refreshed while being read
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_the_page_shows_graph_timeline_state_and_errors_and_follows_a_live_topology(
    store: Path, ui: UiServer, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    before = dump(store)
    browser.get(ui.url)
    link = browser.find_element(By.LINK_TEXT, TOPO)
    link.click()
    wait_for(lambda: browser.find_elements(By.ID, "timeline"), "the timeline")
    browser.find_element(By.ID, "live-toggle").click()  # pause the refresh while reading the page
    time.sleep(0.6)  # a refresh already under way lands before the page is read

    # the graph: every component, with parallelism and groupings; the stateful one marked
    comps = {g.get_attribute("data-component"): g for g in browser.find_elements(By.CSS_SELECTOR, "#graph g.component")}
    assert sorted(comps) == ["count", "lines", "split"]
    assert comps["count"].get_attribute("data-stateful") == "true"
    assert comps["split"].get_attribute("data-stateful") == "false"
    graph_text = browser.find_element(By.ID, "graph").text
    assert "stateful bolt" in graph_text and "WordCount ×2" in graph_text
    assert "fields(word)" in graph_text and "shuffle" in graph_text

    # the timeline: one bar per txid, the failed attempt and the recovery marked
    bars = browser.find_elements(By.CSS_SELECTOR, "#timeline g.batch")
    assert [b.get_attribute("data-txid") for b in bars] == ["1", "2", "3", "4", "5", "6", "6"]
    failed = [b.get_attribute("data-txid") for b in bars if "failed" in (b.get_attribute("class") or "")]
    assert failed == ["3"]
    assert [b.get_attribute("data-status") for b in bars][-2:] == ["preparing", "committed"]
    assert "interrupted" in (bars[-2].get_attribute("class") or "")
    recoveries = browser.find_elements(By.CSS_SELECTOR, "#timeline g.recovery")
    assert [r.get_attribute("data-txid") for r in recoveries] == ["6"]
    assert "recovery" in browser.find_element(By.ID, "timeline").text

    # state namespaces with the key counts the store holds
    b = sqlite_backend(store)
    try:
        counts = {ns: b.count(ns) for ns in NAMESPACES}
    finally:
        b.close()
    rows = browser.find_elements(By.CSS_SELECTOR, "#namespaces tr[data-namespace]")
    shown = {r.get_attribute("data-namespace"): r.find_elements(By.TAG_NAME, "td")[1].text for r in rows}
    assert shown == {ns: str(n) for ns, n in counts.items()}

    # throughput per component over the committed batches
    rate_rows = browser.find_elements(By.CSS_SELECTOR, "#rates tr[data-component]")
    cells = {r.get_attribute("data-component"): [c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rate_rows}
    assert list(cells) == ["lines", "split", "count"]
    assert cells["split"][3:5] == ["6", "12"]  # in/out over the 6 committed batches

    # the injected failure, with its traceback; store text is shown as text, never run as markup
    errors = browser.find_element(By.ID, "errors")
    assert "txid 3" in errors.text and "component count task 1" in errors.text
    assert "ValueError: bad word (txid 3)" in errors.text and 'File "bolt.py", line 7' in errors.text
    assert EVIL in errors.text
    assert not browser.find_elements(By.ID, "injected")

    shot = tmp_path / "weir-ui.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    print(f"\nweir ui screenshot: {shot}")
    artifacts = os.environ.get("WEIR_TEST_ARTIFACTS")
    if artifacts:
        os.makedirs(artifacts, exist_ok=True)
        shutil.copy(shot, os.path.join(artifacts, "weir-ui.png"))

    # serving the page changed nothing in the store
    assert dump(store) == before

    # live: the running topology commits another batch; the open page shows it without a reload
    browser.find_element(By.ID, "live-toggle").click()
    w = sqlite_backend(store)
    try:
        driver(w).batch(6)
    finally:
        w.close()
    wait_for(
        lambda: (
            "7" in [x.get_attribute("data-txid") for x in browser.find_elements(By.CSS_SELECTOR, "#timeline g.batch")]
        ),
        "txid 7 on the open page",
    )
    wait_for(lambda: browser.find_element(By.ID, "record-txid").text == "7", "the record's txid 7")


def test_json_api_read_only_routes_and_unknown_topology(store: Path, ui: UiServer) -> None:
    base = ui.url.rstrip("/")
    with urllib.request.urlopen(f"{base}/api/topologies", timeout=30) as r:  # noqa: S310 - loopback
        assert json.load(r)["topologies"] == [TOPO]
    with urllib.request.urlopen(f"{base}/api/topologies/{TOPO}", timeout=30) as r:  # noqa: S310
        snap = json.load(r)
    assert [h["txid"] for h in snap["history"] if h["kind"] == "batch"] == [1, 2, 3, 4, 5, 6, 6]
    assert snap["record"]["phase"] == "COMMITTED" and snap["record"]["txid"] == 6
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{base}/t/nope", timeout=30)  # noqa: S310
    assert missing.value.code == 404
    req = urllib.request.Request(f"{base}/t/{TOPO}", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as post:
        urllib.request.urlopen(req, timeout=30)  # noqa: S310
    assert post.value.code == 405
