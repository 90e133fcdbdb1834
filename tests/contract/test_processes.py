"""The provider contract under concurrency, once for every store: threads sharing one backend, a
forked child reusing its parent's backend object, pickling (what Spark ships to executors), and a
SIGKILL while a large prepared set is being overwritten.

These replace the per-store copies the backend tests used to carry (SQLite, Redis, PostgreSQL);
processes committing at once and SIGKILL after prepare are in ``test_durability.py``.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
import warnings

import pytest

from tests.contract._support import ALL, DURABLE, new_ns, provider_of, read_line, spawn, txids
from weir.state.factory import open_backend
from weir.state.spi import TransactionalKeyValueState


@ALL
def test_threads_share_one_backend(provider_url: str) -> None:
    backend = provider_of(provider_url).backend
    namespaces = [new_ns("thread") for _ in range(4)]
    errors: list[BaseException] = []

    def work(ns: str) -> None:
        try:
            s = TransactionalKeyValueState(backend, ns)
            for t in range(1, 16):
                s.put("n", t)
                s.put(f"k{t}", t)
                s.prepare_commit(t)
                s.commit(t)
                assert s.get("n") == t
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(ns,)) for ns in namespaces]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    for ns in namespaces:
        assert backend.get(ns, b'"n"') == b"15"
        assert backend.txids(ns).committed == 15
        assert backend.count(ns) == 16


@DURABLE
def test_a_forked_child_reuses_the_backend_object_on_its_own_connection(provider_url: str) -> None:
    backend = provider_of(provider_url).backend
    ns = new_ns("fork")
    backend.write_direct(ns, {b"parent": b"1"}, None)
    assert backend.get(ns, b"parent") == b"1"  # the parent's connection is open
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() in a process with threads
        pid = os.fork()
    if pid == 0:  # child: reuse the inherited backend object
        code = 1
        try:
            if backend.get(ns, b"parent") == b"1":
                backend.write_prepared(ns, 1, {b"child": b"2"}, None)
                backend.commit_prepared(ns, 1, None)
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert backend.get(ns, b"child") == b"2"
    backend.write_direct(ns, {b"after": b"3"}, None)  # the parent's connection survived the child
    assert backend.get_many(ns, [b"parent", b"child", b"after"]) == [b"1", b"2", b"3"]
    assert backend.txids(ns).committed == 1


@DURABLE
def test_backend_and_provider_survive_pickling(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns("pickle")
    provider.backend.write_direct(ns, {b'"a"': b"1"}, None)
    copy = pickle.loads(pickle.dumps(provider.backend))
    try:
        assert copy.get(ns, b'"a"') == b"1"
        assert copy.describe() == provider.backend.describe()
    finally:
        copy.close()
    state = pickle.loads(pickle.dumps(provider)).new_state(ns)
    state.put("word", 7)
    state.prepare_commit(1)
    state.commit(1)
    assert provider.new_state(ns).get("word") == 7
    assert provider.new_state(ns).get("a") == 1


# A writer that prepares a small txid 1, says so, then overwrites the prepared set with a large
# txid 2 over and over until it is killed.
OVERWRITER = r"""
import sys
from weir.state import StateFactory
url, ns, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
state = StateFactory.from_url(url).new_state(ns)
backend = state.backend
state.put("small", 1)
state.put("old", None)
state.prepare_commit(1)
print("prepared", flush=True)
big = {f'"k{i}"'.encode(): str(i).encode() for i in range(n)}
rounds = 0
while True:
    backend.write_prepared(ns, 2, big, None)
    rounds += 1
    if rounds == 1:
        print("overwritten", flush=True)
"""

#: keys in the large prepared set (HBase's Thrift puts are slower: fewer keys, same code path)
LARGE = {"hbase": 5_000}


@DURABLE
@pytest.mark.crash
def test_sigkill_while_a_large_prepared_set_is_overwritten_leaves_one_whole_set(provider_url: str) -> None:
    kind = provider_url.split(":", 1)[0]
    n = LARGE.get(kind, 30_000)
    provider = provider_of(provider_url)
    ns = new_ns("overwrite")
    state = provider.new_state(ns)
    state.put("old", "x")
    state.commit()  # a direct write, no txid
    proc = spawn(OVERWRITER, provider_url, ns, str(n))
    try:
        assert read_line(proc, timeout=120) == "prepared"
        assert read_line(proc, timeout=300) == "overwritten"  # at least one whole large set was written
        time.sleep(0.3)  # and the next overwrite is under way
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    backend = open_backend(provider.config, fresh=True)
    try:
        txid, prepared = backend.load_prepared(ns) or (None, {})
        assert txid == 2, "the large set replaced the small one (whole, never half)"
        assert len(prepared) == n and prepared[f'"k{n - 1}"'.encode()] == str(n - 1).encode()
        recovered = TransactionalKeyValueState(backend, ns)
        recovered.commit(txid)  # recovery rolls the prepared transaction forward
    finally:
        backend.close()
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (2, None)
    assert provider.backend.count(ns) == n + 1  # the large set and the direct write before it
