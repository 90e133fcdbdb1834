"""What only the HBase provider has: Storm's configuration keys, pre-created tables, the non-atomic
apply of a commit (SIGKILLed half-way, then finished by recovery, never visible half-applied), and
the server itself going away (SIGKILL + restart of HBase under a live provider)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.contract._support import committed, new_ns, provider_of, read_line, spawn, txids
from tests.servers import HBaseServer
from weir.errors import ConfigError, FencedError
from weir.state import StateFactory
from weir.state.config import parse_provider_config
from weir.state.hbase.client import HBaseSettings, hbase_settings_from_storm

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


def storm_conf(hbase: HBaseServer, table: str = "state", family: str = "cf") -> dict[str, Any]:
    """Seed 003's configuration, with the gateway's port in the ``hbase.conf`` map."""
    return {
        "hbase.conf": {"hbase.rootdir": "file:///tmp/hbase", "hbase.regionserver.thrift.port": hbase.thrift_port},
        "topology.state.provider": STORM_CLASS,
        "topology.state.provider.config": (
            '{"hbaseConfigKey": "hbase.conf", "tableName": "%s", "columnFamily": "%s"}' % (table, family)
        ),
    }


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
    # the row layout of seed 003: a row per key, in the given table and column family
    conn = hbase.connection()
    try:
        row = conn.table("state").row(ns.encode() + b'\x00d"hello"')
    finally:
        conn.close()
    assert row == {b"cf:v": b"3"}


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


# A writer commits 12,000 keys and SIGKILLs itself when the first of the five apply calls (2,500 rows
# each, four in flight) has returned, i.e. after the commit point with part of the rows written.
HALF_APPLY = r"""
import os, signal, sys
from weir.state import StateFactory
import weir.state.hbase as hb
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
state.commit(2)
print("NOT KILLED", flush=True)
"""


def _raw_values(hbase: HBaseServer, ns: str) -> dict[bytes, bytes]:
    conn = hbase.connection()
    try:
        prefix = ns.encode() + b"\x00d"
        return {k: v[b"cf:v"] for k, v in conn.table("state").scan(row_prefix=prefix)}
    finally:
        conn.close()


def test_sigkill_half_way_through_applying_a_commit_is_finished_and_never_seen_half_applied(
    hbase: HBaseServer,
) -> None:
    ns = new_ns("halfapply")
    url = hbase.url()
    proc = spawn(HALF_APPLY, url, ns)
    assert read_line(proc, timeout=300) == "HALF"
    proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    raw = _raw_values(hbase, ns)
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
    assert set(_raw_values(hbase, ns).values()) == {b"2"}
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (2, None)


def test_a_fenced_writer_late_apply_lands_under_newer_values(hbase: HBaseServer) -> None:
    """Cell timestamps: the apply of an old epoch's commit never overwrites a newer commit."""
    provider = provider_of(hbase.url())
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
    backend._apply(ns, {b'"a"': b"1", b'"b"': b"1"}, stale_ts)
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
