"""``weir state put/delete`` while a topology runs: refused, or forced through the fencing protocol."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import weir
from weir.demo import read_counts, wordcount_topology
from weir.errors import FencedError
from weir.state.factory import close_backends

from ..cli._support import run
from ..servers import wait_until

pytestmark = pytest.mark.spark


def _write(corpus: Path, n: int, words: str) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    tmp = corpus / f".part-{n:05d}.tmp"
    tmp.write_text(words + "\n", encoding="utf-8")
    tmp.rename(corpus / f"part-{n:05d}.txt")


def test_admin_writes_to_a_running_topology(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "in"
    db = tmp_path / "state.db"
    url = f"sqlite:///{db}"
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "topology.state.provider.config": {"url": url},
        "topology.state.checkpoint.interval.ms": 200,
    }
    _write(corpus, 0, "alpha")
    topo = wordcount_topology(str(corpus), parallelism=2, files_per_batch=1)
    live = weir.submit("live", conf, topo, spark=spark).start()
    try:
        wait_until(lambda: read_counts(conf, "live").get("alpha") == 1, timeout=120, what="the first batch")
        ns = next(
            f"live-count-{i}"
            for i in range(2)
            if run(capsys, "state", "get", "--url", url, f"live-count-{i}", "alpha").code == 0
        )
        refused = run(capsys, "state", "put", "--url", url, ns, "alpha", "100")
        assert refused.code != 0
        assert f"namespace {ns!r} belongs to topology 'live', which is running" in refused.err
        assert "--force" in refused.err
        gone = run(capsys, "state", "delete", "--url", url, ns, "alpha")
        assert gone.code != 0 and "which is running" in gone.err
        assert read_counts(conf, "live")["alpha"] == 1

        forced = run(capsys, "state", "put", "--url", url, ns, "alpha", "100", "--force")
        assert forced.code == 0, forced.err
        assert "topology 'live' was running" in forced.err and "fenced" in forced.err
        _write(corpus, 1, "alpha alpha")  # the running driver's next batch meets the fence
        with pytest.raises(FencedError, match="topology 'live': another driver .* or an admin wrote"):
            live.await_termination(timeout=180)
    finally:
        live.stop()
    close_backends()
    assert read_counts(conf, "live")["alpha"] == 100  # the batch in flight did not overwrite it

    again = weir.submit("live", {**conf, "topology.state.checkpoint.interval.ms": 0}, topo, spark=spark)
    st = again.process_available()
    assert st.batches >= 1
    assert read_counts(conf, "live")["alpha"] == 102  # the restarted topology continues from 100
    close_backends()
