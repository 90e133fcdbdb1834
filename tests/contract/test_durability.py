"""The provider contract across processes: a prepared transaction survives SIGKILL of its writer and
is committed or rolled back by a new process; two processes commit into one store at once.

``memory`` is process-local by design and is not part of these tests.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.contract._support import DURABLE_LAYOUTS, committed, new_ns, provider_of, read_line, run_json, spawn, txids

# Writer: on top of the committed txid 1, change things, prepare txid 2, say so, write more
# (pending, never prepared) and hang until killed.
WRITER = r"""
import sys, time
from weir.state import StateFactory
url, ns = sys.argv[1], sys.argv[2]
state = StateFactory.from_url(url).new_state(ns)
state.put("a", 10)
state.delete("b")
state.put("d", {"nested": ["x", 1]})
state.put("ü", "unicode")
state.prepare_commit(2)
print("prepared", flush=True)
state.put("e", "pending only")
state.delete("c")
while True:
    time.sleep(1)
"""

# Recovery: a new process looks at the namespace, then commits or rolls back what is prepared,
# and prints what it sees afterwards.
RECOVER = r"""
import json, sys
from weir.state import StateFactory
url, ns, action = sys.argv[1], sys.argv[2], sys.argv[3]
state = StateFactory.from_url(url).new_state(ns)
before = state.prepared_txid
if action == "commit":
    state.commit(before)
else:
    state.rollback()
rec = state.backend.txids(ns)
state.put("after", action)
state.prepare_commit(3)
state.commit(3)
print(json.dumps({"prepared_before": before, "committed": rec.committed, "prepared": rec.prepared,
                  "view": sorted([k, v] for k, v in state)}))
"""

BASE = {"a": 1, "b": 2, "c": 3}


def _crash_writer(url: str, ns: str) -> None:
    provider = provider_of(url)
    state = provider.new_state(ns)
    for k, v in BASE.items():
        state.put(k, v)
    state.prepare_commit(1)
    state.commit(1)
    proc = spawn(WRITER, url, ns)
    try:
        assert read_line(proc) == "prepared"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    # the crash left txid 2 prepared and txid 1 committed, visible to any new reader
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (1, 2)
    assert committed(provider, ns) == BASE


@DURABLE_LAYOUTS
@pytest.mark.crash
def test_prepared_transaction_survives_sigkill_and_is_committed_by_a_new_process(provider_url: str) -> None:
    ns = new_ns("crash")
    _crash_writer(provider_url, ns)
    out = run_json(RECOVER, provider_url, ns, "commit")
    assert out["prepared_before"] == 2
    assert (out["committed"], out["prepared"]) == (2, None)
    expected = {"a": 10, "c": 3, "d": {"nested": ["x", 1]}, "ü": "unicode", "after": "commit"}
    assert {k: v for k, v in out["view"]} == expected
    provider = provider_of(provider_url)
    assert committed(provider, ns) == expected
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (3, None)


@DURABLE_LAYOUTS
@pytest.mark.crash
def test_prepared_transaction_survives_sigkill_and_is_rolled_back_by_a_new_process(provider_url: str) -> None:
    ns = new_ns("crash")
    _crash_writer(provider_url, ns)
    out = run_json(RECOVER, provider_url, ns, "rollback")
    assert out["prepared_before"] == 2
    assert (out["committed"], out["prepared"]) == (1, None)
    expected = {**BASE, "after": "rollback"}
    assert {k: v for k, v in out["view"]} == expected
    provider = provider_of(provider_url)
    assert committed(provider, ns) == expected
    assert provider.backend.load_prepared(ns) is None


# Many small transactions into one namespace, started together with the other process.
COMMITTER = r"""
import json, sys, time
from weir.state import StateFactory
url, ns, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
state = StateFactory.from_url(url).new_state(ns)
state.get("warm-up")
print("ready", flush=True)
sys.stdin.readline()
start = time.time()
for t in range(1, n + 1):
    state.put(f"k{t}", t)
    if t % 3 == 0:
        state.delete(f"k{t - 1}")
    state.put("last", t)
    state.prepare_commit(t)
    state.commit(t)
print(json.dumps({"done": n, "start": start, "end": time.time()}), flush=True)
"""


@DURABLE_LAYOUTS
def test_two_processes_commit_different_namespaces_of_one_store(provider_url: str) -> None:
    n = 100 if provider_url.startswith("hbase:") else 400  # HBase: slower commits, same protocol
    namespaces = [new_ns("conc"), new_ns("conc")]
    procs = [spawn(COMMITTER, provider_url, ns, str(n)) for ns in namespaces]
    try:
        for p in procs:
            assert read_line(p) == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        spans = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, f"committer failed:\n{err}"
            result = json.loads(out.strip().splitlines()[-1])
            assert result["done"] == n
            spans.append((result["start"], result["end"]))
        # the two writers really ran at the same time
        assert max(s for s, _ in spans) < min(e for _, e in spans)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)
    provider = provider_of(provider_url)
    expected = {f"k{t}": t for t in range(1, n + 1) if not (t % 3 == 2 and t + 1 <= n)}
    expected["last"] = n
    for ns in namespaces:
        rec = txids(provider, ns)
        assert (rec.committed, rec.prepared) == (n, None)
        assert committed(provider, ns) == expected
