"""``weir drpc``: the answer printed as JSON, errors as one line with exit status 2 (a real SQLite store).

The serving side is the topology's own request-log driver (:class:`DrpcDriver`) run in a thread,
without Spark: it takes the request as a batch would and answers it after its "commit".
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from weir.cli.main import main
from weir.drpc.store import Answer
from weir.runtime.spark.trident.drpc import DrpcDriver, DrpcFunction
from weir.state import StateFactory


def test_weir_drpc_prints_the_answer_and_names_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    driver = DrpcDriver("wc", [DrpcFunction("words", ("sum",), True)], StateFactory.from_url(url).backend)
    driver.register()
    stop = threading.Event()

    def serve() -> None:  # one "batch" per 50 ms: take, then answer after the commit
        txid = 0
        while not stop.is_set():
            txid += 1
            taken = driver.take(txid)
            answers = {
                f: {r.rid: Answer("ok", [[len(r.args.split())]], txid=txid, deadline_ms=r.deadline_ms) for r in reqs}
                for f, reqs in taken.items()
            }
            driver.answered(txid, answers)
            time.sleep(0.05)

    server = threading.Thread(target=serve)
    server.start()
    try:
        assert main(["drpc", "words", "cat dog the man", "--url", url, "--timeout", "60"]) == 0
        assert capsys.readouterr().out == "4\n"
    finally:
        stop.set()
        server.join()
    assert main(["drpc", "nope", "x", "--url", url]) == 2
    assert "no topology serves DRPC function 'nope'" in capsys.readouterr().err
    assert main(["drpc", "words", "x", "--url", url, "--timeout", "0.2"]) == 2  # nobody serves it now
    err = capsys.readouterr().err
    assert err.startswith("weir: error: DRPC function 'words', request ") and "no answer after" in err
