"""``weir run``'s live display: a rich panel on a terminal, plain lines otherwise (no Spark)."""

from __future__ import annotations

import io
import threading
from typing import Any

from weir.cli._progress import Progress, RateWindow, batch_line
from weir.runtime.spark.runner import RunStatus


class ScriptedRun:
    """Stands for a TopologyRun: its status advances by one batch per ``advance()``."""

    def __init__(self) -> None:
        self.st = RunStatus(topology="wc", state="running")
        self.lock = threading.Lock()

    def advance(self, txid: int, tuples: int, *, attempts: int = 1, skipped: bool = False) -> None:
        with self.lock:
            s = self.st
            s.last_txid = txid
            s.recent = [
                *s.recent,
                {
                    "n": s.batches + s.skipped + 1,
                    "txid": txid,
                    "tuples": tuples,
                    "job_ms": 120.0,
                    "commit_ms": 2.5,
                    "attempts": attempts,
                    "skipped": skipped,
                },
            ][-8:]
            if skipped:
                s.skipped += 1
                return
            s.batches += 1
            s.tuples_in += tuples
            for comp, k in (("lines", 1), ("split", 5), ("count", 5)):
                c = s.components.setdefault(comp, {"in": 0, "out": 0, "failed": 0})
                c["in"] += tuples * (1 if comp == "lines" else k)
                c["out"] += tuples * (k if comp != "count" else 0)

    def status(self, **_: Any) -> RunStatus:
        with self.lock:
            return RunStatus(
                **{
                    **self.st.__dict__,
                    "recent": list(self.st.recent),
                    "components": {k: dict(v) for k, v in self.st.components.items()},
                }
            )


def test_not_a_terminal_prints_one_line_per_batch_and_the_final_status() -> None:
    run = ScriptedRun()
    out = io.StringIO()
    with Progress(run, interval=0.05, out=out):
        run.advance(1, 1000)
        run.advance(2, 2500, attempts=2)
        run.advance(2, 0, skipped=True)
        run.st.state = "stopped"
    text = out.getvalue()
    assert "\x1b[" not in text  # no terminal escapes in a log
    lines = text.splitlines()
    assert lines.count("batch txid 1: 1k tuples in, job 120 ms, commit 2.5 ms") == 1
    assert lines.count("batch txid 2: 2.5k tuples in, job 120 ms, commit 2.5 ms, 2 attempts") == 1
    assert lines.count("batch txid 2: already committed, replay skipped") == 1
    assert lines[-1].startswith("[stopped]  txid 2  batches 2  tuples 3.5k")


def test_terminal_panel_shows_components_with_rates_and_the_last_batches() -> None:
    run = ScriptedRun()
    p = Progress(run, out=io.StringIO(), terminal=True)
    run.advance(1, 100)
    p._rates.add(0.0, run.status().components)
    run.advance(2, 300)
    p._rates.add(2.0, run.status().components)  # 300 lines in 2 s
    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=110, force_terminal=False, color_system=None).print(p.render(run.status()))
    text = buf.getvalue()
    assert "[running]  txid 2  batches 2" in text
    rows = {
        ln.split()[0]: ln.split() for ln in text.splitlines() if ln.split()[:1] in (["lines"], ["split"], ["count"])
    }
    assert rows["lines"][1:] == ["400", "400", "0", "150", "150"]  # in, out, failed, in/s, out/s
    assert rows["split"][1:] == ["2k", "2k", "0", "750", "750"]
    assert "last batches" in text
    batch_rows = [ln.split() for ln in text.splitlines() if ln.split()[:1] in (["1"], ["2"])]
    assert [r[:2] for r in batch_rows] == [["2", "300"], ["1", "100"]]  # newest first


def test_terminal_mode_writes_a_live_panel() -> None:
    run = ScriptedRun()
    out = io.StringIO()
    with Progress(run, interval=0.05, out=out, terminal=True):
        run.advance(1, 10)
    text = out.getvalue()
    assert "\x1b[" in text and "components" in text and "last batches" in text


def test_rate_window_forgets_old_samples() -> None:
    w = RateWindow(window=5)
    w.add(0, {"a": {"in": 0, "out": 0}})
    w.add(4, {"a": {"in": 400, "out": 0}})
    w.add(10, {"a": {"in": 1000, "out": 0}})
    w.add(11, {"a": {"in": 1100, "out": 70}})
    # the base is the newest sample at least 5 s old (t=4): 700 in and 70 out over 7 s
    assert w.rates() == {"a": (100.0, 10.0)}
    assert batch_line({"txid": 4, "skipped": True}) == "batch txid 4: already committed, replay skipped"
