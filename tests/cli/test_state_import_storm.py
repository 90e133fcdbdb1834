"""``weir state import-storm`` against the state Apache Storm 2.8 itself wrote through storm-redis.

One session fixture compiles ``tests/storm_java`` and runs Storm's stateful word count in
``LocalCluster`` twice at once — ``RedisKeyValueStateProvider`` on a standalone Redis and on the
3-master Redis Cluster — and keeps the exact hashes Storm left (``count-<task>``, ``…$txid``,
``$checkpointspout-<task>``). Each test puts those bytes back into its store (the fixture stores are
flushed between tests) and imports them; no hand-written encoder stands in for Storm. The Kryo
decoder is checked against what Storm's own ``DefaultStateEncoder`` writes for each supported type.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.cli._support import SRC, run
from tests.servers import RedisServer, require_service
from tests.storm_java import local as storm
from weir._util import stable_hash
from weir.cli.storm_kryo import KryoUnsupported, decode_object, decode_state_value, storm_bytes
from weir.connectors.redis.client import redis_client
from weir.demo import generate_corpus, read_counts, wordcount_topology

pytestmark = pytest.mark.services

Cap = pytest.CaptureFixture[str]
Snapshot = dict[bytes, dict[bytes, bytes]]


def _storm_keys(url: str) -> Snapshot:
    """Every hash Storm's word count left: its bolt's ``count-*`` and the checkpoint spout's."""
    client = redis_client(url)
    try:
        if hasattr(client, "get_primaries"):
            conns = [client.get_redis_connection(n) for n in client.get_primaries()]
        else:
            conns = [client]
        keys = [k for c in conns for p in (b"count-*", b"$checkpointspout-*") for k in c.scan_iter(match=p)]
        storms = [k for k in keys if k.split(b"$")[1 if k.startswith(b"$") else 0].rpartition(b"-")[2].isdigit()]
        return {k: client.hgetall(k) for k in storms}
    finally:
        client.close()


def _restore(url: str, snap: Snapshot, *, b64: bool = False) -> None:
    """Put Storm's hashes back, byte for byte (``b64``: as Storm ≤ 1.1.0 stored rows, Base64 text)."""
    client = redis_client(url)
    try:
        for key, fields in snap.items():
            if b64 and not key.endswith(b"$txid"):
                fields = {base64.b64encode(f): base64.b64encode(v) for f, v in fields.items()}
            client.hset(key, mapping=fields)
    finally:
        client.close()


@pytest.fixture(scope="session")
def storm_state(tmp_path_factory: pytest.TempPathFactory, redis_cluster: Any) -> Iterator[dict[str, Any]]:
    """Storm's word count over corpus A, run once per session on Redis and on Redis Cluster."""
    why = storm.java_missing()
    require_service(why is None, f"Apache Storm cannot run: {why}")
    tmp = tmp_path_factory.mktemp("storm")
    classes = storm.compile_sources(tmp / "classes")
    expected = generate_corpus(str(tmp / "a"), n_words=3_000, n_distinct=300, n_files=1, seed=31)
    lines = tmp / "lines.txt"
    lines.write_text("".join(p.read_text() for p in sorted((tmp / "a").iterdir())))
    redis_cluster.flushall()
    with RedisServer() as server:
        started = time.monotonic()
        runs = {
            "redis": (f"redis:127.0.0.1:{server.port}", server.url),
            "redis-cluster": ("cluster:" + ",".join(redis_cluster.addresses), redis_cluster.url),
        }
        procs = {
            kind: storm.start_wordcount(classes, spec, lines, tmp / f"{kind}.json", tmp / f"{kind}.log")
            for kind, (spec, _) in runs.items()
        }
        reports = {kind: storm.finish(p, tmp / f"{kind}.log", tmp / f"{kind}.json") for kind, p in procs.items()}
        seconds = time.monotonic() - started
        snaps = {kind: _storm_keys(url) for kind, (_, url) in runs.items()}
    for kind, rep in reports.items():  # Storm counted every word once (nothing failed, nothing replayed)
        assert rep["failed"] == 0, rep
        assert Counter(rep["counts"]) == expected, kind
        assert any(k.endswith(b"$txid") for k in snaps[kind]), snaps[kind].keys()
    samples = storm.encode_samples(classes, tmp / "samples.jsonl")
    print(
        f"\nApache Storm {storm.STORM_VERSION} LocalCluster word counts (2 at once): {seconds:.1f} s", file=sys.stderr
    )
    yield {"expected": expected, "snapshots": snaps, "samples": samples, "tmp": tmp}


# ---- the decoder, against Storm's own encoder ----------------------------------------------------
def test_decoder_reads_what_storms_default_state_encoder_writes(storm_state: dict[str, Any]) -> None:
    want: dict[str, Any] = {
        "string": "hello",
        "string_1": "a",
        "string_empty": "",
        "string_long": "the-quick-brown-fox-jumps-over-the-lazy-dog-0123456789",
        "string_unicode": "grüße 漢字 😀",
        "long": 1234567890123,
        "long_neg": -42,
        "long_max": 2**63 - 1,
        "long_min": -(2**63),
        "int": 70000,
        "int_neg": -(2**31),
        "double": 3.25,
        "float": 1.5,
        "bool_true": True,
        "bool_false": False,
        "short": -7,
        "byte": 5,
        "char": "x",
        "bytes": b"\x00\x01\x02\xff",
        "list_longs": [1, 2, 3],
        "list_nulls": [1, None, 3],
        "list_strings_null": ["a", None, "bc"],
        "list_mixed": ["a", 2, 3.5, True],
        "list_empty": [],
        "linked_list": ["x", "y"],
        "list_nested": [[1, 2], [3]],
        "hash_set": {"p", "q", "r"},
        "tree_set": {1, 3, 5},
        "hash_map": {"one": 1, "two": 2},
        "linked_hash_map": {"name": "weir", "tags": ["a", "b"], "n": None},
        "tree_map": {"a": 1, "b": 2},
        "map_long_keys": {1: "a"},
    }
    seen = set()
    for s in storm_state["samples"]:
        name, value = s["name"], bytes.fromhex(s["value"])
        seen.add(name)
        if name == "tombstone":
            assert decode_state_value(value) == (False, None)
            continue
        if name.startswith("checkpoint_"):  # Storm's CheckPointState: read by the import, not by the decoder
            with pytest.raises(KryoUnsupported, match=r"org\.apache\.storm\.spout\.CheckPointState"):
                decode_state_value(value)
            continue
        if name.startswith("unsupported"):
            with pytest.raises(KryoUnsupported, match=r"java\.util\.Date"):
                decode_state_value(value)
            continue
        got_key = decode_object(bytes.fromhex(s["key"]))
        assert got_key == want[name] and type(got_key) is type(want[name]), name
        assert decode_state_value(value) == (True, want[name]), name
    assert seen >= set(want) | {"tombstone", "unsupported_date"}


def test_storm_bytes_tells_base64_from_binary() -> None:
    binary = b"\x03th\xe5"  # a Kryo String key as Storm >= 1.1.1 stores it
    assert storm_bytes(binary) == (binary, False)
    assert storm_bytes(base64.b64encode(binary)) == (binary, True)
    with pytest.raises(KryoUnsupported, match="end early"):
        decode_object(b"\x03th")
    with pytest.raises(KryoUnsupported, match="registered with Kryo id 12"):
        decode_object(b"\x0e\x00")


# ---- the import, then weir goes on counting -------------------------------------------------------
def _more_input(tmp: Path) -> tuple[Path, Counter[str]]:
    src = tmp / "b"
    return src, generate_corpus(str(src), n_words=2_000, n_distinct=400, n_files=1, seed=32)


@pytest.mark.parametrize("provider_url", ["redis", "redis-cluster"], indirect=True)
def test_import_then_weir_goes_on_counting(
    storm_state: dict[str, Any], provider_url: str, spark: Any, tmp_path: Path, capsys: Cap
) -> None:
    kind = "redis-cluster" if provider_url.startswith("redis+cluster") else "redis"
    _restore(provider_url, storm_state["snapshots"][kind])
    expected: Counter[str] = storm_state["expected"]
    args = ["state", "import-storm", "--from", provider_url, "--topology", "wc", "--to", provider_url]
    dry = run(capsys, *args, "--component", "count=count", "--dry-run")
    assert dry.code == 0, dry.err
    assert "dry run: nothing was written" in dry.out
    assert "count-" in dry.out and "binary" in dry.out
    for t in range(2):
        n = sum(1 for w in expected if stable_hash(w) % 2 == t)
        assert any(ln.split()[:4] == ["count", str(t), f"wc-count-{t}", str(n)] for ln in dry.lines()), dry.out
    conf = {"topology.state.provider.config": {"url": provider_url}}
    assert read_counts(conf, "wc") == Counter()

    done = run(capsys, *args, "--component", "count=count")
    assert done.code == 0, done.err
    assert "verified" in done.out
    assert read_counts(conf, "wc") == expected
    again = run(capsys, *args, "--component", "count=count")  # idempotent: the marker says it is done
    assert again.code == 0 and "nothing to do" in again.out, again.out

    # Storm's keys are untouched; `weir state ls` lists both
    assert _storm_keys(provider_url) == storm_state["snapshots"][kind]
    ls = run(capsys, "state", "ls", "--url", provider_url)
    assert ls.code == 0, ls.err
    assert "wc-count-0" in ls.out

    # weir's word count goes on over more input: Storm's counts plus the new ones, exactly
    more, extra = _more_input(tmp_path)
    run_conf = {
        **conf,
        "weir.state.dir": str(tmp_path / "state"),
        "weir.spark.master": "local[2]",
    }
    status = weir.submit("wc", run_conf, wordcount_topology(str(more), parallelism=2), spark=spark).process_available()
    assert status.last_txid is not None and status.last_txid > 1
    assert read_counts(conf, "wc") == expected + extra


def test_base64_form_of_storm_1_1_is_read(
    storm_state: dict[str, Any], redis_server: Any, tmp_path: Path, capsys: Cap
) -> None:
    redis_server.flushall()
    _restore(redis_server.url, storm_state["snapshots"]["redis"], b64=True)
    target = f"sqlite:///{tmp_path / 'state.db'}"
    done = run(capsys, "state", "import-storm", "--from", redis_server.url, "--topology", "wc", "--to", target)
    assert done.code == 0, done.err
    assert "base64" in done.out
    assert read_counts({"topology.state.provider.config": {"url": target}}, "wc") == storm_state["expected"]


def test_ls_lists_foreign_namespaces_instead_of_stopping(redis_server: Any, capsys: Cap) -> None:
    redis_server.flushall()
    client = redis_client(redis_server.url)
    try:  # Storm <= 1.1.0's txid record: Base64 text, which weir's own reader does not take for a txid
        client.hset("total-7$txid", mapping={"commit": base64.b64encode(b"12"), "prepare": base64.b64encode(b"12")})
        client.hset("total-7", mapping={base64.b64encode(b"\x03k\xe5"): base64.b64encode(b"\x0b\x00")})
        client.hset("partial-3$txid", mapping={"commit": base64.b64encode(b"4")})
    finally:
        client.close()
    ls = run(capsys, "state", "ls", "--url", redis_server.url)
    assert ls.code == 0, ls.err
    assert [ln.split()[:2] for ln in ls.lines()[2:]] == [["partial-3", "foreign"], ["total-7", "foreign"]]
    assert "2 foreign namespace(s)" in ls.err and "import-storm" in ls.err


def test_undecodable_value_writes_nothing_unless_skipped(
    storm_state: dict[str, Any], redis_server: Any, tmp_path: Path, capsys: Cap
) -> None:
    redis_server.flushall()
    snap = {k: dict(v) for k, v in storm_state["snapshots"]["redis"].items()}
    date = next(s for s in storm_state["samples"] if s["name"] == "unsupported_date")
    key = next(s for s in storm_state["samples"] if s["name"] == "string")["key"]  # "hello", as Storm writes it
    rows = next(k for k in snap if k.startswith(b"count-") and b"$" not in k)
    snap[rows][bytes.fromhex(key)] = bytes.fromhex(date["value"])
    # decoded, but a Map<Long, String> has no JSON form (the target's serializer refuses int keys)
    long_keys = next(s for s in storm_state["samples"] if s["name"] == "map_long_keys")
    a_key = next(s for s in storm_state["samples"] if s["name"] == "string_1")["key"]  # "a"
    snap[rows][bytes.fromhex(a_key)] = bytes.fromhex(long_keys["value"])
    _restore(redis_server.url, snap)
    target = f"sqlite:///{tmp_path / 'state.db'}"
    args = ["state", "import-storm", "--from", redis_server.url, "--topology", "wc", "--to", target]
    refused = run(capsys, *args)
    assert refused.code != 0
    assert f"Storm namespace {rows.decode()!r}, key 'hello'" in refused.err
    assert "java.util.Date" in refused.err and "nothing was written" in refused.err
    assert f"Storm namespace {rows.decode()!r}, key 'a'" in refused.err and "needs str keys" in refused.err
    assert "wc-count" not in run(capsys, "state", "ls", "--url", target).out
    skipped = run(capsys, *args, "--skip-unsupported")
    assert skipped.code == 0, skipped.err
    assert "skipped (--skip-unsupported)" in skipped.out and "'hello'" in skipped.out and "key 'a'" in skipped.out
    assert read_counts({"topology.state.provider.config": {"url": target}}, "wc") == storm_state["expected"]


def test_refuses_a_topology_that_has_state_and_bad_options(
    storm_state: dict[str, Any], redis_server: Any, tmp_path: Path, capsys: Cap
) -> None:
    redis_server.flushall()
    _restore(redis_server.url, storm_state["snapshots"]["redis"])
    target = f"sqlite:///{tmp_path / 'state.db'}"
    base = ["state", "import-storm", "--from", redis_server.url, "--to", target]
    bad = run(capsys, *base, "--topology", "wc", "--component", "count")
    assert bad.code != 0 and "STORM_ID=WEIR_ID" in bad.err
    twice = run(capsys, *base, "--topology", "wc", "--component", "count=c", "--component", "split=c")
    assert twice.code != 0 and "several Storm components onto weir component(s) c" in twice.err
    stray = run(capsys, *base, "--topology", "wc", "--component", "count=count", "--parallelism", "total=2")
    assert stray.code != 0 and "--parallelism names total" in stray.err
    missing = run(capsys, *base, "--topology", "wc", "--component", "total=count")
    assert missing.code != 0 and "no Storm state of component 'total'" in missing.err and "count" in missing.err
    assert run(capsys, *base, "--topology", "wc").code == 0
    # the import is complete: a second run writes nothing, whatever its options
    other = run(capsys, *base, "--topology", "wc", "--parallelism", "count=3")
    assert other.code == 0 and "nothing to do" in other.out
    from tests.cli._support import backend
    from weir.checkpoint.coordinator import CheckPointState, checkpoint_namespace

    b = backend(target)
    try:
        b.write_direct(checkpoint_namespace("ran"), {b"__state": CheckPointState(txid=5).to_bytes()}, None)
    finally:
        b.close()
    taken = run(capsys, *base, "--topology", "ran")
    assert taken.code != 0 and "already has state" in taken.err


# ---- SIGKILL during the import: the next run finishes it, exactly -----------------------------------
def _import_subprocess(source: str, target: str, crash_at: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("WEIR_CRASH_AT", None)
    env.pop("WEIR_CRASH_PGID", None)
    if crash_at:
        env["WEIR_CRASH_AT"] = crash_at
    cmd = [sys.executable, "-m", "weir", "state", "import-storm", "--from", source, "--topology", "wc", "--to", target]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=120, check=False, start_new_session=True
    )


@pytest.mark.parametrize("point", ["import_storm_prepared", "import_storm_committing"])
def test_sigkill_during_import_then_rerun_is_exact(
    storm_state: dict[str, Any], redis_server: Any, tmp_path: Path, point: str
) -> None:
    redis_server.flushall()
    _restore(redis_server.url, storm_state["snapshots"]["redis"])
    target = f"redis://127.0.0.1:{redis_server.port}/2"
    killed = _import_subprocess(redis_server.url, target, f"{point}@1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    conf = {"topology.state.provider.config": {"url": target}}
    if point == "import_storm_prepared":
        assert read_counts(conf, "wc") == Counter()  # prepared only: nothing visible
    done = _import_subprocess(redis_server.url, target, None)
    assert done.returncode == 0, done.stderr
    assert read_counts(conf, "wc") == storm_state["expected"]
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.parametrize("phase", ["committing", "preparing"])
def test_a_prepared_change_set_counts_only_when_storm_was_committing_it(
    storm_state: dict[str, Any], redis_server: Any, tmp_path: Path, capsys: Cap, phase: str
) -> None:
    """Storm's recovery rolls a prepared set forward when its checkpoint spout was COMMITTING, else back."""
    redis_server.flushall()
    samples = {s["name"]: s for s in storm_state["samples"]}
    snap = {k: dict(v) for k, v in storm_state["snapshots"]["redis"].items()}
    rows = next(k for k in snap if k.startswith(b"count-") and b"$" not in k)
    spout = next(k for k in snap if k.startswith(b"$checkpointspout-") and not k.endswith(b"$txid"))
    word_key = next(iter(snap[rows]))
    word = decode_object(word_key)
    # what Storm's own classes write: a prepared Long, its txid 7, and the spout's CheckPointState(7, phase)
    snap[rows + b"$prepare"] = {word_key: bytes.fromhex(samples["long"]["value"])}
    snap[rows + b"$txid"] = {**snap[rows + b"$txid"], b"prepare": b"7"}
    snap[spout] = {
        bytes.fromhex(samples[f"checkpoint_{phase}"]["key"]): bytes.fromhex(samples[f"checkpoint_{phase}"]["value"])
    }
    _restore(redis_server.url, snap)
    target = f"sqlite:///{tmp_path / 'state.db'}"
    done = run(capsys, "state", "import-storm", "--from", redis_server.url, "--topology", "wc", "--to", target)
    assert done.code == 0, done.err
    expected = Counter(storm_state["expected"])
    if phase == "committing":
        expected[word] = 1234567890123
        assert "rolled forward" in done.out
    else:
        assert "left out (Storm rolls it back)" in done.out
    assert read_counts({"topology.state.provider.config": {"url": target}}, "wc") == expected
