# ruff: noqa: D101, D102, D103 - a one-off tool script, like examples/
"""Make the screenshot of ``weir ui`` in docs/observability.md from a real run.

    python docs/tools/ui_screenshot.py docs/observability-ui.png

A word count over generated text runs on local Spark, one file per batch. The counting bolt fails
once on its first attempt of one batch (retried), and the first driver is SIGKILLed while txid 6 is
PREPARING (``WEIR_CRASH_AT``); a second driver recovers and finishes. Then ``weir ui`` serves the
store and headless Chromium (Debian's ``chromium`` + ``chromium-driver``) takes the screenshot.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from weir.sources import FileSpout
from weir.topology import BasicBolt, Fields, StatefulBolt, TopologyBuilder, Values

NAME = "wordcount"


class SplitSentence(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def execute(self, tup, collector):
        for word in tup.get_string(0).split():
            collector.emit(Values(word))


class WordCount(StatefulBolt):
    """Counts words; raises once (while the marker file exists) on a word of batch 3."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word", "count"))

    def init_state(self, state):
        self.counts = state

    def execute(self, tup):
        word = tup.get_string(0)
        if word.startswith("boom") and os.path.exists(self.marker):
            os.remove(self.marker)
            msg = f"cannot count {word!r}: the lookup service timed out"
            raise TimeoutError(msg)
        self.counts.put(word, self.counts.get(word, 0) + 1)
        self.collector.ack(tup)


def topology(corpus: str, marker: str):
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(corpus, files_per_batch=1))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("count", WordCount(marker), 2).fields_grouping("split", Fields("word"))
    return b.create_topology()


def drive(work: Path) -> None:
    import weir

    conf = {"weir.state.dir": str(work / "state"), "weir.spark.master": "local[2]"}
    weir.submit(NAME, conf, topology(str(work / "in"), str(work / "fail-once"))).process_available()


def main(out: Path) -> None:
    from weir.demo import generate_corpus

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        generate_corpus(str(work / "in"), n_words=60_000, n_distinct=3_000, n_files=8, seed=11)
        with open(work / "in" / "part-00002.txt", "a", encoding="utf-8") as fh:
            fh.write("boom boom\n")
        (work / "fail-once").write_text("1")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "WEIR_CRASH_AT": "after_preparing@6"}
        cmd = [sys.executable, __file__, "--drive", str(work)]
        first = subprocess.run(cmd, env=env, start_new_session=True, check=False)
        print(f"first driver: exit {first.returncode} (killed while PREPARING txid 6)")
        env.pop("WEIR_CRASH_AT")
        subprocess.run(cmd, env=env, start_new_session=True, check=True)
        shoot(work / "state" / "state.db", out)


def shoot(db: Path, out: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from weir.state.config import parse_provider_config
    from weir.state.factory import open_backend
    from weir.ui import StoreReader, UiServer

    cfg = parse_provider_config(
        {"topology.state.provider": "sqlite", "topology.state.provider.config": {"url": f"sqlite:///{db}"}}
    )
    backend = open_backend(cfg, fresh=True)
    server = UiServer(StoreReader(backend), port=0, refresh_s=0).start()
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
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
        "--window-size=1400,1750",
        "--hide-scrollbars",
    ):
        opts.add_argument(flag)
    drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        drv.get(f"{server.url}t/{NAME}")
        drv.save_screenshot(str(out))
        print(f"wrote {out}")
    finally:
        drv.quit()
        server.stop()
        backend.close()


if __name__ == "__main__":
    if sys.argv[1] == "--drive":
        drive(Path(sys.argv[2]))
    else:
        main(Path(sys.argv[1]).resolve())
