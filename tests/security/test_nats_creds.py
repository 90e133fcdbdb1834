"""NatsSpout with a NATS ``.creds`` file against nats-server in operator mode (decentralized JWT auth).

The operator, account and user keys are made with ``nkeys`` and their JWTs signed in the test
(:mod:`tests.security._nats_jwt`); the server resolves accounts from a preloaded memory resolver.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security._servers import OperatorNats
from weir.connectors.nats.spout import NatsSpout
from weir.errors import ConfigError, SourceError

pytest.importorskip("nkeys")
pytest.importorskip("nats")

from tests.security._nats_jwt import Identity, OperatorSetup, creds_file_text, make_operator_setup  # noqa: E402


@pytest.fixture(scope="module")
def setup() -> OperatorSetup:
    return make_operator_setup()


@pytest.fixture(scope="module")
def operator_nats(tmp_path_factory: pytest.TempPathFactory, setup: OperatorSetup) -> Iterator[OperatorNats]:
    with OperatorNats(tmp_path_factory.mktemp("nats-operator"), setup.server_conf) as server:
        yield server


def _rows(spout: NatsSpout, start: dict[str, object], end: dict[str, object]) -> list[object]:
    out: list[object] = []
    for part_start, part_end in spout.partitions(start, end):
        for batch in spout.read(part_start, part_end):
            out.extend(batch.to_pylist() if hasattr(batch, "to_pylist") else [batch])
    return out


def test_nats_spout_reads_with_a_creds_file(operator_nats: OperatorNats, setup: OperatorSetup, tmp_path: Path) -> None:
    creds = tmp_path / "reader.creds"
    creds.write_text(setup.user_creds())
    spout = NatsSpout(operator_nats.url, "CREDS", creds_file=str(creds), connect_timeout_s=5)

    async def publish(nc: object) -> None:
        js = nc.jetstream()  # type: ignore[attr-defined]
        await js.add_stream(name="CREDS", subjects=["creds.>"])
        for i in range(5):
            await js.publish("creds.x", b"m%d" % i)

    spout._run(publish, "test setup")
    start = spout.initial_offset()
    end = spout.latest_offset(start, spout.read_limit())
    assert end["seq"] == 5
    rows = _rows(spout, start, end)
    assert sorted(r["data"] for r in rows) == [f"m{i}" for i in range(5)]  # type: ignore[index]


def test_a_wrong_creds_file_is_a_clear_redacted_error(
    operator_nats: OperatorNats, setup: OperatorSetup, tmp_path: Path
) -> None:
    # a user signed by an account the server does not know
    import nkeys

    stranger = Identity.new(nkeys.PREFIX_BYTE_ACCOUNT)
    user = Identity.new(nkeys.PREFIX_BYTE_USER)
    jwt = stranger.sign_jwt(user.public, "intruder", {"type": "user", "pub": {}, "sub": {}})
    wrong = tmp_path / "wrong.creds"
    wrong.write_text(creds_file_text(jwt, user.seed))
    # the right JWT with another user's seed (cannot sign the server's nonce)
    mismatched = tmp_path / "mismatched.creds"
    mismatched.write_text(creds_file_text(setup.user_jwt, user.seed))
    # not a creds file at all
    garbage = tmp_path / "garbage.creds"
    garbage.write_text("hello " + user.seed.decode() + "\n")
    with pytest.raises(ConfigError) as refused:  # at submit time
        NatsSpout(operator_nats.url, "CREDS", creds_file=str(garbage))
    assert "not a NATS .creds file" in str(refused.value) and str(garbage) in str(refused.value)
    assert user.seed.decode() not in str(refused.value)
    for path, secret in ((wrong, user.seed), (mismatched, user.seed)):
        spout = NatsSpout(operator_nats.url, "CREDS", creds_file=str(path), connect_timeout_s=1)
        with pytest.raises(SourceError) as info:
            spout.initial_offset()
        text = str(info.value)
        assert "cannot connect" in text and "creds_file" in text and str(path) in text, text
        assert secret.decode() not in text, text
        assert jwt not in text and setup.user_jwt not in text
        assert info.value.__cause__ is None  # the client's own exception may quote the file
        assert "refused the credentials" in text, text
