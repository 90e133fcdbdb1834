"""The performance benchmarks run as their docs say, on a tiny input, and verify their counts.

Performance is never asserted here (that is what ``bench/`` is for); these tests prove that the
commands in docs/performance.md work: every variant runs on this session's Spark, the counts each
variant produces are checked exactly by the benchmark itself (exit status 0), and the JSON it
writes holds one result per variant.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

pytestmark = [pytest.mark.spark]


@contextlib.contextmanager
def _yield(value: str) -> Iterator[str]:
    yield value


@pytest.fixture
def bench_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench/`` importable here, and its modules pickled by value for the Python workers.

    Run as scripts, the benchmarks' functions live in ``__main__`` and travel by value anyway.
    """
    import importlib

    from pyspark import cloudpickle

    monkeypatch.syspath_prepend(str(BENCH))
    for name in ("storm_wordcount", "trident_wordcount", "latency"):
        cloudpickle.register_pickle_by_value(importlib.import_module(name))


def test_trident_wordcount_benchmark_runs_and_verifies_every_variant(
    spark: Any, bench_path: None, tmp_path: Path, postgres_url: str, redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _common
    import trident_wordcount

    # the benchmark's own servers are replaced by this session's (no second redis-server, no new database)
    monkeypatch.setattr(trident_wordcount, "redis_server", lambda: _yield(redis_server.url))
    monkeypatch.setattr(trident_wordcount, "postgres_database", lambda: _yield(postgres_url))
    assert _common.PG_ADMIN_DSN

    out = tmp_path / "twc.json"
    variants = "native,pysplit,nostate,floor,to-null,to-sqlite,tt-redis,to-postgres"
    argv = ["--words", "3000", "--keys", "200", "--files", "2", "--files-per-batch", "1", "--repeat", "1",
            "--no-warmup", "--variants", variants, "--out", str(out)]  # fmt: skip
    assert trident_wordcount.main(argv) == 0
    data = json.loads(out.read_text())
    got = {r["variant"]: r for r in data["results"]}
    assert sorted(got) == sorted(variants.split(","))
    assert all(r["verified"] and r["batches"] == 2 and r["words"] == 3000 for r in got.values())
    assert got["native"]["vs_native"] == pytest.approx(1.0)
    assert any(v.startswith("target to-sqlite") for v in data["targets"])


def test_storm_wordcount_benchmark_verifies_and_measures_the_bolts_alone_and_weirs_tasks(
    spark: Any, bench_path: None, tmp_path: Path
) -> None:
    import storm_wordcount

    out = tmp_path / "swc.json"
    argv = ["--words", "3000", "--distinct", "200", "--files", "2", "--files-per-batch", "1",
            "--variants", "a,e,f,g", "--no-warmup", "--out", str(out)]  # fmt: skip
    assert storm_wordcount.main(argv) == 0
    data = json.loads(out.read_text())
    got = {r["variant"]: r for r in data["results"]}
    assert sorted(got) == ["a", "e", "f", "g"] and all(r["verified"] and r["words"] == 3000 for r in got.values())
    # where the CPU went (seconds): (a), (f) and (g) run Python workers beside the JVM; native (e) runs none
    kinds = {v: r["breakdown"]["cpu_by_kind"] for v, r in got.items()}
    assert all(kinds[v]["python_workers"] > 0 and kinds[v]["jvm"] > 0 for v in "afg")
    assert kinds["e"]["jvm"] > 0 and kinds["e"]["python_workers"] < kinds["a"]["python_workers"] / 5
    assert all(0 <= k["jit"] <= k["jvm"] + 0.05 for k in kinds.values())  # the JIT's threads are the JVM's
    assert set(data["cpu_by_kind_us_per_word"]) == {"a", "e", "f", "g"}
    assert any(v.startswith("target (a) >= 0.75x (e)") for v in data["targets"]["verdicts"])
    bolts, tasks = data["bolt_code"], data["tasks_without_spark"]
    assert tasks["words"] == 3000  # the whole (small) corpus went through one task of each bolt
    for part in (bolts, tasks):
        assert part["split_us"] > 0 and part["count_us"] > 0
        assert part["total_us"] == pytest.approx(part["split_us"] + part["count_us"], abs=0.002)


def test_latency_benchmark_reports_percentiles_per_variant(spark: Any, bench_path: None, tmp_path: Path) -> None:
    import latency

    out = tmp_path / "lat.json"
    assert latency.main(["--sizes", "5", "--batches", "3", "--no-warmup", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["variant"] for r in rows] == ["native", "storm", "trident"]
    for r in rows:
        assert r["batches"] == 3 and r["verified"]
        assert 0 < r["p50_ms"] <= r["p95_ms"]
    assert rows[0]["overhead_p50_ms"] == 0.0
    assert sys.modules["latency"].TARGET_OVERHEAD_MS == 50.0


def test_stage_timings_are_read_from_a_benchmark_event_log(tmp_path: Path) -> None:
    """``--event-log`` then ``bench/stages.py``: the benchmark's own Spark (a fresh process) writes the log."""
    import subprocess

    log_dir = tmp_path / "events"
    cmd = [sys.executable, str(BENCH / "trident_wordcount.py"), "--words", "2000", "--keys", "50", "--files", "2",
           "--files-per-batch", "1", "--repeat", "1", "--no-warmup", "--variants", "to-sqlite",
           "--event-log", str(log_dir), "--out", str(tmp_path / "twc.json")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    sys.path.insert(0, str(BENCH))
    try:
        import stages
    finally:
        sys.path.remove(str(BENCH))
    assert stages.main([str(log_dir)]) == 0
    written = list(log_dir.rglob("*.stages.json"))
    assert len(written) == 1
    res = json.loads(written[0].read_text())
    assert res["jobs"] >= 2 and res["job_wall_ms"] > 0  # two micro-batches, at least one job each
    kinds = " ".join(res["stages"])
    assert "MapInArrow" in kinds and "Exchange" in kinds  # the Trident stages: Python split, state routing
    assert all(k["n"] >= 1 and k["wall_ms"] >= 0 for k in res["stages"].values())


def test_the_floors_checksums_catch_a_wrong_count(bench_path: None, tmp_path: Path) -> None:
    """``floor`` and ``to-null`` keep no counts: their per-batch checksums must still catch one wrong count."""
    import zlib

    import trident_wordcount as twc
    from wordcount_corpus import generate_corpus

    inp = tmp_path / "in"
    expected = generate_corpus(inp, 400, 30, 4, 7)
    batches = [["part-00000.txt", "part-00002.txt"], ["part-00001.txt", "part-00003.txt"]]  # as Spark may batch them
    good = [(files, twc.tally_of([inp / f for f in files])) for files in batches]
    assert sum(t[1] for _, t in good) == sum(expected.values()) == 400
    assert twc.verify_tallies(good, inp) == (True, "")
    (groups, words, chk), (word, other) = good[1][1], sorted(expected)[:2]
    one_more = (groups, words, chk + zlib.crc32(word.encode()))  # one word counted once too often...
    moved = (groups, words, chk + zlib.crc32(other.encode()) - zlib.crc32(word.encode()))  # ...or moved
    for wrong in (one_more, moved, (groups - 1, words, chk)):
        assert not twc.verify_tallies([good[0], (batches[1], wrong)], inp)[0]
    assert not twc.verify_tallies([(batches[1], good[0][1]), (batches[0], good[1][1])], inp)[0]  # swapped
    assert "the batches read" in twc.verify_tallies(good[:1], inp)[1]  # a batch missing
    assert "the batches read" in twc.verify_tallies([*good, good[0]], inp)[1]  # a file read twice

    # the null store's lines, summed over the partitions of each txid, in txid order, with the
    # files of the file source's batches (its log in the query's checkpoint)
    ckpt = tmp_path / "ckpt"
    (ckpt / "sources" / "0").mkdir(parents=True)
    for b, files in enumerate(batches):
        entries = [json.dumps({"path": f"file://{inp / f}", "timestamp": 1, "batchId": b}) for f in files]
        (ckpt / "sources" / "0" / str(b)).write_text("\n".join(["v1", *entries]) + "\n")
    tally = tmp_path / "null.tallies"
    (g1, w1, c1), (g2, w2, c2) = good[0][1], good[1][1]
    tally.write_text(f"8 {g2} {w2} {c2}\n7 {g1 - 3} {w1 - 5} {c1 - 9}\n7 3 5 9\n")
    assert twc.null_tallies(tally, ckpt) == good
    assert twc.verify_tallies(twc.null_tallies(tally, ckpt), inp) == (True, "")


def test_sqlite_many_keys_benchmark_measures_the_store_and_sqlite(bench_path: None, tmp_path: Path) -> None:
    """``bench/sqlite_many_keys.py`` on a tiny input: both parts run, the state part's table is checked."""
    import sqlite_many_keys

    out = tmp_path / "keys.json"
    argv = ["--keys", "2000", "--batches", "2", "--rows", "3000", "--batch", "1000", "--rounds", "1", "--out", str(out)]
    assert sqlite_many_keys.main(argv) == 0  # the state part exits non-zero unless every key holds count 1
    data = json.loads(out.read_text())
    state = data["state"]
    assert state["keys"] == 2000 and not state["engine_only"]
    assert state["update_cpu"] > 0 and state["get_wall"] > 0 and state["put_wall"] > 0 and state["wal_mib"] > 0
    for label in ("one connection", "two connections, taking turns"):
        costs = data["sqlite"][label]
        assert sorted(costs) == ["commit", "read", "read json_each", "read temp table", "replace", "update", "upsert"]
        assert all(v >= 0 for v in costs.values()) and costs["upsert"] > 0
    with pytest.raises(SystemExit):
        sqlite_many_keys.main(["--pragma", "cache_size=1; DROP TABLE wc"])


def test_rescale_benchmark_re_partitions_and_verifies(bench_path: None, tmp_path: Path) -> None:
    """``bench/rescale.py`` on tiny inputs (SQLite): every key lands in its new task (the script checks it)."""
    import rescale

    out = tmp_path / "rescale.json"
    assert rescale.main(["--keys", "300", "3000", "--stores", "sqlite", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["store"], r["keys"]) for r in rows] == [("sqlite", 300), ("sqlite", 3000)]
    assert all(r["seconds"] > 0 and r["keys_per_s"] > 0 for r in rows)


def test_state_ttl_benchmark_sweeps_and_verifies(bench_path: None, tmp_path: Path) -> None:
    """``bench/state_ttl.py`` on a tiny input (SQLite): every expiring key is gone (the script checks it)."""
    import state_ttl

    out = tmp_path / "ttl.json"
    assert (
        state_ttl.main(["--expiring", "300", "--live", "100", "--repeat", "1", "--stores", "sqlite", "--out", str(out)])
        == 0
    )
    r = json.loads(out.read_text())["results"]["sqlite"]
    assert r["sweep_commit_ms"] > 0 and r["expired_keys_per_s"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["storm", "trident"])
def test_connect_profile_runs_both_sessions_and_exits(dialect: str, tmp_path: Path) -> None:
    """``bench/connect_profile.py`` as docs/where-weir-runs.md gives it, on a tiny corpus, in its own process.

    It starts a classic session and a Spark Connect server of its own, profiles the word count on
    both, writes a row per batch (Storm) or per query (Trident) for each, and exits: its process
    ends (a Connect client left open on a query's session once kept it retrying at exit).
    """
    import subprocess

    out = tmp_path / "profile.json"
    cmd = [sys.executable, str(BENCH / "connect_profile.py"), dialect, "--words", "6000", "--files", "4"]
    done = subprocess.run(
        [*cmd, "--out", str(out)], cwd=BENCH.parent, capture_output=True, text=True, timeout=480, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"classic", "connect"}
    for rows in results.values():
        assert rows and all(r["wall_s"] > 0 and r["jobs"] >= 1 for r in rows), rows
    if dialect == "trident":
        assert all("first_job_s" in rows[0] for rows in results.values()), results
    else:
        assert all(r["server"] for r in results["connect"]), results["connect"]  # the server's operation events


def _run_bench(cmd: list[str], out: Path) -> dict[str, Any]:
    """Run a benchmark script in its own process, from the repository's root; its JSON."""
    import subprocess

    done = subprocess.run(
        [sys.executable, *cmd, "--out", str(out)], cwd=BENCH.parent, capture_output=True, text=True, timeout=480,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    data: dict[str, Any] = json.loads(out.read_text())
    return data


@pytest.mark.slow
def test_storm_wordcount_connect_benchmark_runs_both_sessions_and_verifies(tmp_path: Path) -> None:
    """``bench/storm_wordcount.py --connect`` as docs/where-weir-runs.md gives it, on a tiny corpus.

    Its own classic session and Spark Connect server; each variant's counts are checked by the
    script against the generator's (exit status 0 only if all are right).
    """
    data = _run_bench(
        ["bench/storm_wordcount.py", "--connect", "--words", "6000", "--distinct", "200", "--files", "4",
         "--repeat", "1"], tmp_path / "swc.json",
    )  # fmt: skip
    got = {r["variant"]: r for r in data["results"]}
    assert sorted(got) == ["classic", "connect"]
    for r in got.values():
        assert r["verified"] and r["words"] == 6000 and r["batches"] == 2, r
        assert 0 < r["job_median_s"] and 0 < r["batch_median_s"] and r["first_batch_median_s"] > 0, r
    assert got["classic"]["vs_classic"] == 1.0 and got["connect"]["vs_classic"] > 0
    assert data["target_connect_vs_classic"] == 0.8


@pytest.mark.slow
def test_trident_wordcount_connect_benchmark_runs_both_sessions_and_verifies(tmp_path: Path) -> None:
    """``bench/trident_wordcount.py --connect`` as docs/where-weir-runs.md gives it, on a tiny corpus.

    A real streaming query on each session (``process_available``); the map state is read back
    and checked against the generator's counts by the script.
    """
    data = _run_bench(
        ["bench/trident_wordcount.py", "--connect", "--words", "6000", "--keys", "200", "--files", "4",
         "--repeat", "1"], tmp_path / "twc.json",
    )  # fmt: skip
    assert data["verified"] is True
    got = {r["variant"]: r for r in data["results"]}
    assert sorted(got) == ["classic", "connect"]
    for r in got.values():
        assert r["words"] == 6000 and r["batches"] == 2 and len(r["runs_s"]) == 1, r
        assert 0 < r["median_batch_span_s"] <= r["median_s"], r  # the batches lie inside the run
    assert data["target"].startswith("target: connect >= 0.8x classic: whole run ")


@pytest.mark.slow
def test_storm_connect_ab_benchmark_runs_a_git_revision_beside_this_tree(tmp_path: Path) -> None:
    """``bench/storm_connect_ab.py --base REV``: the Connect stages of a git revision and this tree's, interleaved.

    The base is read with ``git show`` (here HEAD); both versions' batches run against one server
    and every count is checked by the script.
    """
    data = _run_bench(
        ["bench/storm_connect_ab.py", "--base", "HEAD", "--words", "6000", "--distinct", "200", "--files", "4"],
        tmp_path / "ab.json",
    )
    got = {r["version"]: r for r in data["results"]}
    assert sorted(got) == ["base", "this tree"]
    assert all(r["verified"] and r["batches"] == 2 and r["median_s"] > 0 for r in got.values()), got
    assert data["args"]["base"] == "HEAD"
