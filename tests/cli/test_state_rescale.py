"""``weir state rescale``: offline re-partition with a table of key counts, dry run, refusals."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.cli._support import run
from weir._util import stable_hash
from weir.checkpoint.coordinator import RECORD_KEY, CheckPointState, checkpoint_namespace
from weir.checkpoint.history import TOPOLOGY_KEY
from weir.state import StateFactory

Cap = pytest.CaptureFixture[str]
WORDS = Counter({f"w{i}": i + 1 for i in range(40)})


def _store(url: str, *, updated_ms: int = 0, grouping: str = "fields", window: bool = False) -> None:
    """A stopped word count (``wc``, bolt ``count`` of 2 tasks) whose record was stored ``updated_ms``."""
    provider = StateFactory.from_url(url)
    for t in range(2):
        state = provider.new_state(f"wc-count-{t}")
        for w, c in WORDS.items():
            if stable_hash(w) % 2 == t:
                state.put(w, c)
        state.prepare_commit(4)
        state.commit(4)
    rec = json.loads(CheckPointState(txid=4, parallelism={"count": 2}).to_bytes())
    rec["updated_ms"] = updated_ms
    shape = {"components": [{"id": "count", "inputs": [{"source": "split", "grouping": grouping}]}]}
    rows = {RECORD_KEY: json.dumps(rec).encode(), TOPOLOGY_KEY: json.dumps(shape).encode()}
    provider.backend.write_direct(checkpoint_namespace("wc"), rows, None)
    if window:
        provider.backend.write_direct("wc-count-0-window", {b'"meta"': b"{}"}, None)


def _counts(url: str, tasks: int) -> Counter[str]:
    provider = StateFactory.from_url(url)
    got: Counter[str] = Counter()
    for t in range(tasks):
        for w, c in provider.new_state(f"wc-count-{t}"):
            assert stable_hash(w) % tasks == t
            got[w] += c
    return got


def test_rescale_dry_run_then_grow_and_shrink(capsys: Cap, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _store(url)
    args = ["state", "rescale", "--url", url, "--topology", "wc", "--component", "count"]
    dry = run(capsys, *args, "--to", "5", "--dry-run")
    assert dry.code == 0, dry.err
    per_task = Counter(stable_hash(w) % 5 for w in WORDS)
    for t in range(5):
        assert any(ln.split()[:3] == [str(t), f"wc-count-{t}", str(per_task[t])] for ln in dry.lines()), dry.out
    assert "nothing was written" in dry.out
    assert _counts(url, 2) == WORDS  # untouched
    for tasks in (5, 3):
        done = run(capsys, *args, "--to", str(tasks))
        assert done.code == 0, done.err
        assert _counts(url, tasks) == WORDS
        rec = json.loads(StateFactory.from_url(url).backend.get(checkpoint_namespace("wc"), RECORD_KEY) or b"{}")
        assert rec["parallelism"] == {"count": tasks}
    backend = StateFactory.from_url(url).backend
    assert backend.txids("wc-count-2").committed == 4  # the next batch's txid follows
    assert [ns for ns in backend.namespaces() if ns.startswith("wc-count-")] == [f"wc-count-{t}" for t in range(3)]


def test_rescale_refused_while_running_and_for_unsplittable_state(capsys: Cap, tmp_path: Path) -> None:
    import time

    url = f"sqlite:///{tmp_path / 'live.db'}"
    _store(url, updated_ms=int(time.time() * 1000))
    args = ["state", "rescale", "--url", url, "--topology", "wc", "--component", "count", "--to", "3"]
    live = run(capsys, *args)
    assert live.code == 2 and "'wc' is running" in live.err and "Stop it first" in live.err
    assert _counts(url, 2) == WORDS
    for kw, what in (({"grouping": "shuffle"}, "shuffle"), ({"window": True}, "windowed bolt")):
        other = f"sqlite:///{tmp_path / (what + '.db')}"
        _store(other, **kw)  # type: ignore[arg-type]
        refused = run(capsys, "state", "rescale", "--url", other, *args[4:])
        assert refused.code == 2 and what in refused.err and "'count'" in refused.err, refused.err
        assert _counts(other, 2) == WORDS
    unknown = run(capsys, "state", "rescale", "--url", url, "--topology", "wc", "--component", "nope", "--to", "3")
    assert unknown.code == 2 and "no stateful component 'nope'" in unknown.err and "count" in unknown.err
