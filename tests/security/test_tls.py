"""TLS per store against real servers: Redis ``rediss://`` with a CA file and a client certificate,
NATS over TLS with a client certificate and NKey authentication, PostgreSQL's libpq ``ssl*`` url options.

Certificates are made here with ``openssl`` (a throw-away CA, a server certificate for 127.0.0.1 and
a client certificate); NKeys with the ``nkeys`` library.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security._servers import Certs, TlsNats, TlsRedis, make_certs
from weir.connectors.nats.spout import NatsSpout
from weir.connectors.redis import RedisBackend
from weir.errors import ConfigError, SourceError
from weir.state.config import parse_provider_config
from weir.state.factory import open_backend

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[TlsRedis]:
    with TlsRedis(tmp_path_factory.mktemp("redis-tls"), certs) as server:
        yield server


def _redis(options: dict[str, object]) -> RedisBackend:
    cfg = parse_provider_config({"topology.state.provider": "redis", "topology.state.provider.config": options})
    backend = open_backend(cfg, fresh=True)
    assert isinstance(backend, RedisBackend)
    return backend


def test_redis_tls_with_ca_and_client_certificate(tls_redis: TlsRedis, certs: Certs) -> None:
    tls = {"caFile": str(certs.ca), "certFile": str(certs.client_cert), "keyFile": str(certs.client_key)}
    backend = _redis({"url": tls_redis.url, "tls": tls})
    try:
        backend.write_prepared("tls-ns", 1, {b"k": b"v"}, epoch=None)
        backend.commit_prepared("tls-ns", 1, epoch=None)
        assert backend.get("tls-ns", b"k") == b"v"
        assert backend.describe().startswith("rediss://")
    finally:
        backend.close()
    # the same with redis-py's query spelling in the url
    url = f"{tls_redis.url}?ssl_ca_certs={certs.ca}&ssl_certfile={certs.client_cert}&ssl_keyfile={certs.client_key}"
    backend = _redis({"url": url})
    try:
        assert backend.get("tls-ns", b"k") == b"v"
    finally:
        backend.close()


def test_redis_tls_refusals_are_clear(tls_redis: TlsRedis, certs: Certs) -> None:
    # a CA that did not sign the server's certificate
    with pytest.raises(ConfigError, match="TLS|certificate") as info:
        _redis(
            {
                "url": tls_redis.url,
                "tls": {
                    "caFile": str(certs.other_ca),
                    "certFile": str(certs.client_cert),
                    "keyFile": str(certs.client_key),
                },
            }
        )
    assert f"127.0.0.1:{tls_redis.tls_port}" in str(info.value)
    # no client certificate: the server refuses the handshake
    with pytest.raises(ConfigError, match="cannot use Redis"):
        _redis({"url": tls_redis.url, "tls": {"caFile": str(certs.ca)}})
    # plain redis:// to a TLS port, and TLS options without TLS
    with pytest.raises(ConfigError):
        _redis({"url": tls_redis.url.replace("rediss://", "redis://") + "?timeout=500"})
    with pytest.raises(ConfigError, match="not a readable file"):
        _redis({"url": tls_redis.url, "tls": {"caFile": "/nonexistent/ca.pem"}})


# ---- NATS ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nkey_seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    nkeys = pytest.importorskip("nkeys")
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    path = tmp_path_factory.mktemp("nkey") / "user.nk"
    path.write_bytes(seed)
    return path, nkeys.from_seed(bytearray(seed)).public_key.decode()


@pytest.fixture(scope="module")
def tls_nats(tmp_path_factory: pytest.TempPathFactory, certs: Certs, nkey_seed: tuple[Path, str]) -> Iterator[TlsNats]:
    _, public = nkey_seed
    auth = f"authorization {{ users: [ {{ nkey: {public} }} ] }}\n"
    with TlsNats(tmp_path_factory.mktemp("nats-tls"), certs, auth) as server:
        yield server


def _publish_and_create(spout: NatsSpout, n: int) -> None:
    async def setup(nc: object) -> None:
        js = nc.jetstream()  # type: ignore[attr-defined]
        await js.add_stream(name=spout.stream, subjects=[f"{spout.stream.lower()}.>"])
        for i in range(n):
            await js.publish(f"{spout.stream.lower()}.x", b"m%d" % i)

    spout._run(setup, "test setup")


def test_nats_tls_client_certificate_and_nkey(tls_nats: TlsNats, certs: Certs, nkey_seed: tuple[Path, str]) -> None:
    seed_path, _ = nkey_seed
    spout = NatsSpout(
        tls_nats.url,
        "SECURE",
        tls_ca_file=str(certs.ca),
        tls_cert_file=str(certs.client_cert),
        tls_key_file=str(certs.client_key),
        nkey_seed_file=str(seed_path),
        connect_timeout_s=5,
    )
    _publish_and_create(spout, 3)
    start = spout.initial_offset()
    end = spout.latest_offset(start, spout.read_limit())
    assert end["seq"] == 3
    rows = [r for part_start, part_end in spout.partitions(start, end) for r in _rows(spout, part_start, part_end)]
    assert len(rows) == 3


def _rows(spout: NatsSpout, start: dict[str, object], end: dict[str, object]) -> list[object]:
    out: list[object] = []
    for batch in spout.read(start, end):
        out.extend(batch.to_pylist() if hasattr(batch, "to_pylist") else [batch])
    return out


def test_nats_refuses_without_nkey_or_with_a_wrong_ca(
    tls_nats: TlsNats, certs: Certs, nkey_seed: tuple[Path, str]
) -> None:
    seed_path, _ = nkey_seed
    tls = {"tls_ca_file": str(certs.ca), "tls_cert_file": str(certs.client_cert), "tls_key_file": str(certs.client_key)}
    no_nkey = NatsSpout(tls_nats.url, "SECURE", connect_timeout_s=1, **tls)
    with pytest.raises(SourceError, match="cannot connect"):
        no_nkey.initial_offset()
    wrong_ca = NatsSpout(
        tls_nats.url,
        "SECURE",
        connect_timeout_s=1,
        nkey_seed_file=str(seed_path),
        **{**tls, "tls_ca_file": str(certs.other_ca)},
    )
    with pytest.raises(SourceError, match="cannot connect"):
        wrong_ca.initial_offset()
