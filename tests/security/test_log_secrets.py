"""No secret in anything weir logs: a topology and the CLI run against real servers with passwords.

The run is ``weir --verbose --debug run`` (Spark's own driver logs and the JVM's stderr shown) of a
topology whose module turns every Python logger of the driver on at DEBUG, reading a NATS stream
that needs a user and password and keeping its state in a Redis that needs a password (both given
in URLs of a ``--conf-file``); Spark's event log is on. Then ``weir state`` commands on that Redis
and on PostgreSQL with a password in the URL, and failures (a wrong password, an unreachable
server; a NATS password the server refuses). Everything is collected — stdout and stderr of every
command (Python logging, the driver's and the JVM's stderr, Spark's log4j output, the Python
workers' stderr), Spark's event log, the checkpoint directory — and searched for the secrets.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security._servers import PasswordRedis
from tests.servers import NatsServer, PostgresDatabase, RedisServer, free_port

SECRET = "Lg-S3cretPw-7781"  # noqa: S105 - a test password
NATS_SECRET = "Nats-S3cret-4410"  # noqa: S105 - a test password
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TOPOLOGY = """
import logging
import os

logging.basicConfig(level=logging.DEBUG)  # every Python logger of the driver, at DEBUG

from wordcount import WordCountBolt

from weir.sources import NatsSpout
from weir.topology import Fields, TopologyBuilder

NAME = "secretscan"


def topology(conf):
    builder = TopologyBuilder()
    builder.set_spout("words", NatsSpout(conf["nats.url"], "WORDS", fields=["word"], connect_timeout_s=20))
    builder.set_bolt("count", WordCountBolt(), 2).fields_grouping("words", Fields("word"))
    return builder
"""


class PasswordNats(NatsServer):
    """nats-server -js requiring a user and password."""

    def command(self) -> list[str]:
        """With ``--user`` and ``--pass``."""
        return [*super().command(), "--user", "weir", "--pass", NATS_SECRET]


@pytest.fixture(scope="module")
def password_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with PasswordRedis(tmp_path_factory.mktemp("redis-logpw"), extra_args=["--requirepass", SECRET]) as server:
        yield server


@pytest.fixture(scope="module")
def password_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with PasswordNats(tmp_path_factory.mktemp("nats-logpw")) as server:
        yield server


def _publish(url: str, words: list[str]) -> None:
    import nats

    async def go() -> None:
        nc = await nats.connect(url, user="weir", password=NATS_SECRET)
        js = nc.jetstream()
        await js.add_stream(name="WORDS", subjects=["words.>"])
        for w in words:
            await js.publish("words.x", w.encode())
        await nc.close()

    asyncio.run(go())


def _weir(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("WEIR_VERBOSE", None)
    return subprocess.run(
        [sys.executable, "-m", "weir", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _leaks(text: str, secrets: list[str]) -> list[str]:
    lines = text.splitlines()
    return [f"{s!r} in: {ln[:300]}" for s in secrets for ln in lines if s in ln]


def _files_with(root: Path, secrets: list[str], skip: set[Path]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and path not in skip:
            data = path.read_bytes()
            found += [f"{s!r} in {path}" for s in secrets if s.encode() in data]
    return found


@pytest.mark.timeout(1200)  # a Spark driver start and a handful of CLI processes, on a loaded machine
def test_no_secret_in_any_log_of_a_run_and_of_the_cli(
    password_redis: RedisServer,
    password_nats: NatsServer,
    postgres_database: PostgresDatabase,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    secrets = [SECRET, NATS_SECRET]
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "examples" / "wordcount.py", work / "wordcount.py")
    (work / "topo.py").write_text(TOPOLOGY)
    redis_url = f"redis://:{SECRET}@127.0.0.1:{password_redis.port}/0"
    nats_url = f"nats://weir:{NATS_SECRET}@127.0.0.1:{password_nats.port}"
    events = tmp_path / "events"
    events.mkdir()
    conf = {
        "nats.url": nats_url,
        "topology.state.provider": "redis",
        "topology.state.provider.config": {"url": redis_url, "keyClass": "str", "valueClass": "int"},
        "weir.spark.conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri()},
    }
    secret_files = tmp_path / "secret-conf"
    secret_files.mkdir()
    conf_file = secret_files / "conf.json"
    conf_file.write_text(json.dumps(conf))
    _publish(f"nats://127.0.0.1:{password_nats.port}", ["alpha", "beta", "alpha", "gamma"] * 5)

    outputs: list[tuple[str, subprocess.CompletedProcess[str]]] = []
    ran = _weir("--verbose", "--debug", "run", "topo.py", "--available-now", "--conf-file", str(conf_file), cwd=work)
    outputs.append(("weir run", ran))
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "DEBUG" in ran.stderr  # Python logging at DEBUG really was captured ...
    assert "WARN" in ran.stderr or "INFO" in ran.stderr  # ... and Spark's own log4j output

    state_conf = secret_files / "state.json"
    state_conf.write_text(json.dumps({"topology.state.provider.config": {"url": redis_url}}))
    listed = _weir("--debug", "state", "ls", "--conf-file", str(state_conf), cwd=work)
    outputs.append(("weir state ls", listed))
    assert listed.returncode == 0 and "secretscan-count" in listed.stdout, listed.stderr
    ns = next(w for w in listed.stdout.split() if w.startswith("secretscan-count"))
    outputs.append(
        ("weir state inspect", _weir("--debug", "state", "inspect", "--conf-file", str(state_conf), ns, cwd=work))
    )

    pg_url = postgres_database.url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")
    pg_conf = secret_files / "pg.json"
    pg_conf.write_text(json.dumps({"topology.state.provider.config": {"url": pg_url}}))
    for argv in (
        ("state", "put", "--conf-file", str(pg_conf), "pg-ns", '"k"', "1"),
        ("state", "ls", "--conf-file", str(pg_conf)),
    ):
        res = _weir("--debug", *argv, cwd=work)
        outputs.append((" ".join(argv[:2]), res))
        assert res.returncode == 0, res.stderr

    # failures: a wrong password, a server that is not there
    wrong = secret_files / "wrong.json"
    wrong.write_text(json.dumps({"topology.state.provider.config": {"url": redis_url.replace(SECRET, SECRET + "x")}}))
    dead = secret_files / "dead.json"
    dead.write_text(json.dumps({"topology.state.provider.config": {
        "url": f"postgresql://postgres:{SECRET}@127.0.0.1:{free_port()}/x", "connectTimeout": 1}}))  # fmt: skip
    for f in (wrong, dead):
        res = _weir("--debug", "state", "ls", "--conf-file", str(f), cwd=work)
        outputs.append((f"weir state ls ({f.name})", res))
        assert res.returncode != 0
    # a wrong NATS password in the driver (the spout's calls, every Python logger at DEBUG)
    from weir.connectors.nats.spout import NatsSpout
    from weir.errors import SourceError

    bad = NatsSpout(nats_url.replace(NATS_SECRET, NATS_SECRET + "x"), "WORDS", connect_timeout_s=2)
    with caplog.at_level(logging.DEBUG), pytest.raises(SourceError) as info:
        bad.initial_offset()
    assert "refused the credentials (the url's user information)" in str(info.value)
    logged = caplog.text + "\n" + str(info.value) + "\n" + "\n".join(capfd.readouterr())
    assert not _leaks(logged, secrets), _leaks(logged, secrets)[:5]

    leaks = [f"{what}: {leak}" for what, r in outputs for leak in _leaks(r.stdout + "\n" + r.stderr, secrets)]
    assert not leaks, "\n".join(leaks[:20])
    # Spark's event log (what the UI's environment page shows) and every file the run left behind
    assert any(events.iterdir()), "no Spark event log was written"
    on_disk = _files_with(tmp_path, secrets, {conf_file, state_conf, pg_conf, wrong, dead})
    assert not on_disk, "\n".join(on_disk[:20])
