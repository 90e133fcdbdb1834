"""The word count on a Spark standalone master with two workers (separate executor JVMs and Python
workers), started from the PySpark install, with Redis state: nothing may rely on shared memory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from tests.servers import free_port, require_binary, wait_until
from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent
DRIVER = Path(__file__).parent.parent / "crash" / "storm_driver.py"


def _spark_class(*args: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with open(log, "wb") as f:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _master_state(ui_port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            state = json.load(r)
    except (OSError, ValueError):  # not up yet; a master still starting may answer /json/ with an HTML page
        return {}
    return state if isinstance(state, dict) else {}


def _alive_workers(ui_port: int) -> int:
    return sum(1 for w in _master_state(ui_port).get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    require_binary("java")
    d = tmp_path_factory.mktemp("spark-standalone")
    port, ui = free_port(), free_port()
    procs = [
        _spark_class(
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
            log=d / "master.log",
        )
    ]
    url = f"spark://127.0.0.1:{port}"
    try:
        # the workers start once the master is ALIVE: a worker whose first registration comes before the
        # master's leader election is not answered and retries only after Spark's randomized 5-15 s
        wait_until(lambda: _master_state(ui).get("status") == "ALIVE", timeout=90, what="the standalone master")
        for i in range(2):
            procs.append(
                _spark_class(
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(d / f"work{i}"),
                    log=d / f"worker{i}.log",
                )
            )
        wait_until(lambda: _alive_workers(ui) == 2, timeout=90, what="two standalone workers registered")
        yield url, d
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def test_wordcount_with_redis_state_and_a_custom_provider_by_dotted_path_on_two_workers(
    standalone: tuple[str, Path], redis_server: object, tmp_path: Path
) -> None:
    """Two word counts side by side in one driver on the two workers (one driver start for both): one
    with Redis state; one with a user's StateProvider (tests.spark._custom_provider) by dotted path and
    its coordinator record in the store ``weir.coordinator.url`` names (the default, a SQLite file, is
    refused on a cluster)."""
    from tests.spark._custom_provider import read_namespace

    master, workdir = standalone
    corpus, custom_corpus = tmp_path / "corpus", tmp_path / "custom-corpus"
    expected = generate_corpus(str(corpus), n_words=6_000, n_distinct=250, n_files=3, seed=11)
    custom_expected = generate_corpus(str(custom_corpus), n_words=3_000, n_distinct=120, n_files=2, seed=7)
    redis_server.flushall()  # type: ignore[attr-defined]
    url = redis_server.url  # type: ignore[attr-defined]
    env = dict(
        os.environ,
        WEIR_TEST_MASTER=master,
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        WEIR_TEST_PROVIDER="tests.spark._custom_provider.RedisHashProvider",
        WEIR_TEST_COORDINATOR_URL=url,
        WEIR_TEST_PROVIDER_FOR="customwc",  # clusterwc keeps the Redis provider of its URL
        PYTHONPATH=str(Path(__file__).parent.parent.parent),  # the driver imports the provider by path
    )
    env.pop("WEIR_CRASH_AT", None)
    res = subprocess.run(
        [
            sys.executable,
            str(DRIVER),
            *(str(tmp_path / "state"), str(corpus), url, "clusterwc"),
            *(str(tmp_path / "custom-state"), str(custom_corpus), url, "customwc"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    assert "clusterwc DONE txid=3" in res.stdout, res.stdout
    assert "customwc DONE txid=2" in res.stdout, res.stdout
    # the word count with Redis state
    provider = StateFactory.from_url(url)
    got: Counter[str] = Counter()
    for i in range(2):
        got.update(dict(provider.new_state(f"clusterwc-count-{i}")))
    assert got == expected
    # the user's provider: its Redis hashes, the record in weir.coordinator.url, nothing forced into SQLite
    got = Counter()
    for i in range(2):
        got.update(read_namespace(url, f"customwc-count-{i}"))
    assert got == custom_expected
    record = StateFactory.from_url(url).backend.get("$checkpointspout-customwc", b"__state")
    assert record is not None
    assert json.loads(record)["phase"] == "COMMITTED" and json.loads(record)["txid"] == 2
    assert not (tmp_path / "custom-state" / "state.db").exists()
    # an executor ran on each worker (its own JVM, its own Python workers)
    for i in range(2):
        assert list((workdir / f"work{i}").glob("app-*/*/stderr")), f"no executor ran on worker {i}"


def test_sqlite_state_refused_on_the_cluster(standalone: tuple[str, Path], tmp_path: Path) -> None:
    master, _ = standalone
    corpus = tmp_path / "corpus"
    generate_corpus(str(corpus), n_words=100, n_distinct=10, n_files=1, seed=1)
    env = dict(os.environ, WEIR_TEST_MASTER=master, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    res = subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path / "state"), str(corpus), f"sqlite:///{tmp_path / 's.db'}", "sq"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode != 0
    assert "ConfigError" in res.stderr and "sqlite" in res.stderr and master in res.stderr
