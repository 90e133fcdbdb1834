"""What only the HBase provider has: Storm's configuration keys, pre-created tables, the non-atomic
apply of a commit (SIGKILLed half-way, then finished by recovery, never visible half-applied), and
the server itself going away (SIGKILL + restart of HBase under a live provider)."""

from __future__ import annotations

import json
import signal
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.contract._support import committed, new_ns, provider_of, read_line, spawn, txids
from tests.servers import HBaseServer
from weir.connectors.hbase.client import DEFAULT_BUCKETS, HBaseSettings, hbase_settings_from_storm
from weir.connectors.hbase.kv import Layout
from weir.errors import ConfigError, FencedError
from weir.state import StateFactory
from weir.state.config import parse_provider_config

pytestmark = pytest.mark.services

STORM_CLASS = "org.apache.storm.hbase.state.HBaseKeyValueStateProvider"


@pytest.fixture
def hbase(hbase_server: HBaseServer) -> Iterator[HBaseServer]:
    """The session's HBase with an empty ``state`` table; backends closed before and after."""
    from weir.state.factory import close_backends

    close_backends()
    hbase_server.truncate("state")
    yield hbase_server
    close_backends()


def storm_conf(hbase: HBaseServer, table: str = "state", family: str = "cf", **extra: Any) -> dict[str, Any]:
    """Seed 003's configuration, with the gateway's port in the ``hbase.conf`` map (and ``extra`` keys)."""
    options = {"hbaseConfigKey": "hbase.conf", "tableName": table, "columnFamily": family, **extra}
    return {
        "hbase.conf": {"hbase.rootdir": "file:///tmp/hbase", "hbase.regionserver.thrift.port": hbase.thrift_port},
        "topology.state.provider": STORM_CLASS,
        "topology.state.provider.config": json.dumps(options),
    }


def _bucket_row(ns: str, key: bytes, buckets: int = DEFAULT_BUCKETS) -> bytes:
    """The row of ``key`` in the buckets layout, computed independently of weir's code."""
    return ns.encode() + b"\x00b" + f"{zlib.crc32(key) % buckets:04x}".encode()


def _row(hbase: HBaseServer, row: bytes) -> dict[bytes, bytes]:
    conn = hbase.connection()
    try:
        return dict(conn.table("state").row(row))
    finally:
        conn.close()


def test_storm_provider_config_is_accepted_unchanged(hbase: HBaseServer) -> None:
    seed = {
        "hbase.conf": {"hbase.rootdir": "file:///tmp/hbase"},
        "topology.state.provider": STORM_CLASS,
        "topology.state.provider.config": (
            '{"hbaseConfigKey": "hbase.conf", "tableName": "state", "columnFamily": "cf"}'
        ),
    }
    # seed 003's configuration, as is: the gateway on its default port
    assert parse_provider_config(seed).url == "hbase://localhost:9090/state?family=cf&timeout=60000"
    conf = storm_conf(hbase)
    cfg = parse_provider_config(conf)
    assert cfg.provider == "hbase"
    assert cfg.url == f"hbase://localhost:{hbase.thrift_port}/state?family=cf&timeout=60000"
    ns = new_ns("storm")
    state = StateFactory.get_state(ns, conf)
    state.put("hello", 3)
    state.prepare_commit(1)
    state.commit(1)
    # the same rows through the URL form
    assert committed(provider_of(hbase.url()), ns) == {"hello": 3}
    # the default layout: the key is a column of its bucket row, in the given table and family
    assert _row(hbase, _bucket_row(ns, b'"hello"')) == {b'cf:"hello"': b"3"}
    assert _row(hbase, ns.encode() + b'\x00d"hello"') == {}
    # Storm's row per key, with the layout key beside tableName
    conf = storm_conf(hbase, layout="rows")
    assert parse_provider_config(conf).url.endswith("&layout=rows")
    ns = new_ns("stormrows")
    state = StateFactory.get_state(ns, conf)
    state.put("hello", 4)
    state.prepare_commit(1)
    state.commit(1)
    assert _row(hbase, ns.encode() + b'\x00d"hello"') == {b"cf:v": b"4"}
    assert committed(provider_of(hbase.url()), ns) == {"hello": 4}


def test_layout_options_parse_and_validate() -> None:
    s = HBaseSettings.from_url("hbase://h:9091/t?family=f&layout=buckets&buckets=16")
    assert (s.layout, s.buckets) == ("buckets", 16)
    assert HBaseSettings.from_url(s.url) == s
    assert HBaseSettings.from_url("hbase://h/t").layout is None
    assert "layout" not in HBaseSettings.from_url("hbase://h/t").url
    with pytest.raises(ConfigError, match="layout must be buckets or rows, got 'columns'"):
        HBaseSettings.from_url("hbase://h/t?layout=columns")
    with pytest.raises(ConfigError, match="buckets must be between 1 and 65536, got 0"):
        HBaseSettings.from_url("hbase://h/t?buckets=0")
    with pytest.raises(ConfigError, match="buckets is an option of layout=buckets"):
        HBaseSettings.from_url("hbase://h/t?layout=rows&buckets=8")
    with pytest.raises(ConfigError, match="buckets must be an integer"):
        HBaseSettings.from_url("hbase://h/t?buckets=many")
    # Storm-style keys beside the url, folded into it
    cfg = parse_provider_config(
        {"topology.state.provider.config": {"url": "hbase://h:1/t?family=f", "layout": "buckets", "buckets": 64}}
    )
    assert cfg.url.endswith("&layout=buckets&buckets=64")
    assert "layout" not in cfg.options and "buckets" not in cfg.options
    with pytest.raises(ConfigError, match=r"layout must be 'buckets' or 'rows', got 'row'"):
        parse_provider_config(
            {
                "topology.state.provider": STORM_CLASS,
                "topology.state.provider.config": {"tableName": "t", "columnFamily": "c", "layout": "row"},
            }
        )


def test_a_namespace_keeps_its_recorded_layout_and_a_mismatch_names_it(hbase: HBaseServer) -> None:
    rows_ns, buckets_ns = new_ns("laidrows"), new_ns("laidbuckets")
    by_rows = provider_of(hbase.url() + "&layout=rows")
    state = by_rows.new_state(rows_ns)
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    by_buckets = provider_of(hbase.url() + "&layout=buckets&buckets=16")
    state = by_buckets.new_state(buckets_ns)
    for i in range(100):
        state.put(f"k{i}", i)
    state.prepare_commit(1)
    state.commit(1)
    # the layout and bucket count are in the txid record
    assert by_rows.backend.layout(rows_ns) == Layout("rows")
    assert by_rows.backend._read_meta(rows_ns)[1]["l"] == "rows"
    assert by_buckets.backend._read_meta(buckets_ns)[1]["n"] == 16
    assert _row(hbase, _bucket_row(buckets_ns, b'"k7"', 16))[b'cf:"k7"'] == b"7"
    # an explicit other layout: a clear error naming the namespace and both layouts, reads and writes
    wrong = provider_of(hbase.url() + "&layout=buckets")
    with pytest.raises(ConfigError, match=rf"namespace '{rows_ns}' .* written with the rows layout.*layout=buckets"):
        wrong.new_state(rows_ns).get("a")
    with pytest.raises(ConfigError, match=rf"namespace '{rows_ns}' .* rows layout"):
        wrong.backend.write_direct(rows_ns, {b'"b"': b"2"}, None)
    with pytest.raises(ConfigError, match=rf"'{buckets_ns}' .* buckets layout \(16 buckets\).*layout=rows"):
        list(by_rows.new_state(buckets_ns))
    with pytest.raises(ConfigError, match="buckets layout"):
        by_rows.backend.acquire_epoch(buckets_ns)
    # nothing was written by the refused calls
    assert committed(provider_of(hbase.url()), rows_ns) == {"a": 1}
    # no layout configured: each namespace is read and written the way it was laid out
    auto = provider_of(hbase.url())
    assert auto.new_state(rows_ns).get("a") == 1
    assert committed(auto, buckets_ns) == {f"k{i}": i for i in range(100)}
    auto.backend.write_direct(buckets_ns, {b'"k7"': None}, None)
    assert len(committed(auto, buckets_ns)) == 99
    # a record written before layouts existed (no "l") is the rows layout
    raw, meta = auto.backend._read_meta(rows_ns)
    del meta["l"]
    conn = hbase.connection()
    try:
        conn.table("state").put(rows_ns.encode() + b"\x00m", {b"cf:m": json.dumps(meta).encode()})
    finally:
        conn.close()
    fresh = provider_of(hbase.url())
    assert fresh.backend.layout(rows_ns) == Layout("rows")
    assert fresh.new_state(rows_ns).get("a") == 1


def test_missing_table_or_family_names_it_and_the_create_command(hbase: HBaseServer) -> None:
    with pytest.raises(ConfigError, match=r"table 'nosuch' does not exist.*create 'nosuch', 'cf'"):
        StateFactory.get_provider(storm_conf(hbase, table="nosuch")).validate()  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"no column family 'zz'.*alter 'state', 'zz'.*create 'state', 'zz'"):
        provider_of(hbase.url(family="zz")).validate()
    with pytest.raises(ConfigError, match="tableName"):
        parse_provider_config({"topology.state.provider": STORM_CLASS, "topology.state.provider.config": {}})
    with pytest.raises(ConfigError, match="hbaseConfigKey is 'nope'"):
        parse_provider_config(
            {
                "topology.state.provider": STORM_CLASS,
                "topology.state.provider.config": {"hbaseConfigKey": "nope", "tableName": "t", "columnFamily": "c"},
            }
        )


def test_gateway_transport_and_protocol_from_the_url_or_hbase_keys() -> None:
    """A gateway started with ``-f`` / ``-c`` is reached with the matching client settings."""
    url = "hbase://h:9091/t?family=f&transport=framed&protocol=compact"
    s = HBaseSettings.from_url(url)
    assert (s.framed, s.compact, s.port, s.table, s.family) == (True, True, 9091, "t", "f")
    assert HBaseSettings.from_url(s.url) == s
    plain = HBaseSettings.from_url("hbase://h/t")
    assert (plain.framed, plain.compact) == (False, False)
    assert "transport" not in plain.url
    options = {"hbaseConfigKey": "hb", "tableName": "t", "columnFamily": "f"}
    keys = {"hbase.regionserver.thrift.framed": "true", "hbase.regionserver.thrift.compact": False}
    s = hbase_settings_from_storm(options, {"hb": keys}, "cfg")
    assert (s.framed, s.compact) == (True, False)
    with pytest.raises(ConfigError, match=r"hbase.regionserver.thrift.framed must be true or false, got 'yes'"):
        hbase_settings_from_storm(options, {"hb": {"hbase.regionserver.thrift.framed": "yes"}}, "cfg")
    with pytest.raises(ConfigError, match="transport must be buffered or framed"):
        HBaseSettings.from_url("hbase://h/t?transport=http")


# A writer commits 12,000 keys and SIGKILLs itself when the first of the apply calls (2,500 rows, or
# 3,500 cells of bucket rows, each) has returned, i.e. after the commit point with part of the rows
# written.
HALF_APPLY = r"""
import os, signal, sys
from weir.state import StateFactory
import weir.connectors.hbase as hb
url, ns = sys.argv[1:3]
provider = StateFactory.from_url(url)
state = provider.new_state(ns)
for i in range(12_000):
    state.put(f"k{i}", 1)
state.prepare_commit(1)
state.commit(1)
for i in range(12_000):
    state.put(f"k{i}", 2)
state.prepare_commit(2)
calls = [0]
real = provider.backend.hb.mutate_rows
def mutate_rows(batch, ts=None):
    real(batch, ts)
    if ts is not None:
        calls[0] += 1
        if calls[0] == 1:
            print("HALF", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
provider.backend.hb.mutate_rows = mutate_rows
hb.kv.APPLY_THREADS = 1  # one apply call at a time: the kill lands after exactly one of them
state.commit(2)
print("NOT KILLED", flush=True)
"""


def _raw_values(hbase: HBaseServer, ns: str, layout: str) -> dict[bytes, bytes]:
    """Every committed cell of ``ns`` in HBase itself (``{key: value}``), read without weir."""
    conn = hbase.connection()
    try:
        if layout == "rows":
            prefix = ns.encode() + b"\x00d"
            return {k[len(prefix) :]: v[b"cf:v"] for k, v in conn.table("state").scan(row_prefix=prefix)}
        out: dict[bytes, bytes] = {}
        for _, cells in conn.table("state").scan(row_prefix=ns.encode() + b"\x00b"):
            out.update({c[3:]: v for c, v in cells.items()})
        return out
    finally:
        conn.close()


@pytest.mark.parametrize("layout", ["buckets", "rows"])
def test_sigkill_half_way_through_applying_a_commit_is_finished_and_never_seen_half_applied(
    hbase: HBaseServer, layout: str
) -> None:
    ns = new_ns("halfapply")
    url = hbase.url() + f"&layout={layout}"
    proc = spawn(HALF_APPLY, url, ns)
    assert read_line(proc, timeout=300) == "HALF"
    proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    raw = _raw_values(hbase, ns, layout)
    assert len(raw) == 12_000
    new_rows = sum(1 for v in raw.values() if v == b"2")
    assert 0 < new_rows < 12_000, "the key rows should be half-applied in HBase itself"
    provider = provider_of(url)
    # readers through weir see txid 2 fully: the commit point had passed
    assert txids(provider, ns).committed == 2
    assert set(committed(provider, ns).values()) == {2}
    assert provider.new_state(ns).get("k11999") == 2
    assert provider.backend.count(ns) == 12_000
    # the next writer (a new driver taking an epoch) finishes the apply in HBase itself
    provider.backend.acquire_epoch(ns)
    assert set(_raw_values(hbase, ns, layout).values()) == {b"2"}
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (2, None)


@pytest.mark.parametrize("layout", ["buckets", "rows"])
def test_a_fenced_writer_late_apply_lands_under_newer_values(hbase: HBaseServer, layout: str) -> None:
    """Cell timestamps: the apply of an old epoch's commit never overwrites a newer commit."""
    provider = provider_of(hbase.url() + f"&layout={layout}")
    backend = provider.backend
    ns = new_ns("zombie")
    old_epoch = backend.acquire_epoch(ns)
    backend.write_prepared(ns, 1, {b'"a"': b"1"}, old_epoch)
    backend.commit_prepared(ns, 1, old_epoch)
    raw, meta = backend._read_meta(ns)
    stale_ts = int(meta["s"])
    new_epoch = backend.acquire_epoch(ns)
    backend.write_prepared(ns, 2, {b'"a"': b"2", b'"b"': None}, new_epoch)
    backend.commit_prepared(ns, 2, new_epoch)
    with pytest.raises(FencedError):
        backend.write_prepared(ns, 3, {b'"a"': b"3"}, old_epoch)
    # what a zombie still applying txid 1 would write now, at txid 1's timestamp
    backend._apply(ns, {b'"a"': b"1", b'"b"': b"1"}, stale_ts, backend.layout(ns))
    assert committed(provider, ns) == {"a": 2}


@pytest.mark.slow
def test_hbase_sigkill_and_restart_under_a_live_provider(hbase: HBaseServer) -> None:
    provider = provider_of(hbase.url())
    ns = new_ns("restart")
    state = provider.new_state(ns)
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.put("b", 2)
    state.prepare_commit(2)
    hbase.kill_and_restart()
    assert provider.new_state(ns).get("a") == 1
    rec = provider.backend.txids(ns)
    assert (rec.committed, rec.prepared) == (1, 2)
    state.commit(2)
    state.put("c", 3)
    state.prepare_commit(3)
    state.commit(3)
    assert committed(provider, ns) == {"a": 1, "b": 2, "c": 3}


def test_a_finished_commits_staged_row_goes_with_the_next_prepare(hbase: HBaseServer) -> None:
    """The commit does not wait for the delete of its staged row: the next prepare's write takes it along."""
    provider = provider_of(hbase.url())
    ns = new_ns("garbage")
    state = provider.new_state(ns)

    def staged_rows() -> list[bytes]:
        conn = hbase.connection()
        try:
            return [k for k, _ in conn.table("state").scan(row_prefix=ns.encode() + b"\x00s")]
        finally:
            conn.close()

    finished: list[bytes] = []
    for txid in (1, 2, 3):
        state.put("a", txid)
        state.prepare_commit(txid)
        # only the prepared set: the last commit's staged row went with the prepare's own write
        token = provider.backend._read_meta(ns)[1]["p"][1]
        assert staged_rows() == [ns.encode() + b"\x00s" + token.encode()]
        state.commit(txid)
        # the commit left its staged row, named as garbage in the txid record
        assert staged_rows() == [ns.encode() + b"\x00s" + token.encode()]
        assert provider.backend._read_meta(ns)[1]["g"] == token
        finished.append(token.encode())
    assert len(set(finished)) == 3
    # a commit with no prepare since the last one (recovery, write_direct) deletes the older row itself
    provider.backend.write_direct(ns, {b'"b"': b"1"}, None)
    provider.backend.write_direct(ns, {b'"b"': b"2"}, None)
    assert len(staged_rows()) == 1
    assert committed(provider, ns) == {"a": 3, "b": 2}
    provider.backend.drop(ns)
    assert staged_rows() == []
