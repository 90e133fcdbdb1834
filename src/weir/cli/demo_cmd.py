"""``weir demo``: the word count of seed 000 on generated text, embedded SQLite state, verified."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from typing import Any

from weir.cli._progress import Progress
from weir.cli._table import human_count, print_table

__all__ = ["register"]

#: the demo's own topology name: its namespaces are ``weir-demo-count-<task>`` and
#: ``$checkpointspout-weir-demo``, and nothing else is ever reset (the examples use other names)
TOPOLOGY = "weir-demo"


def _reset_previous_run(state_dir: str, conf: dict[str, Any], parallelism: int) -> list[str]:
    """Drop what a previous demo wrote, and only that; returns the namespaces dropped."""
    from weir.checkpoint.coordinator import checkpoint_namespace
    from weir.state import StateFactory

    shutil.rmtree(os.path.join(state_dir, "demo-corpus"), ignore_errors=True)
    shutil.rmtree(os.path.join(state_dir, "spark", TOPOLOGY), ignore_errors=True)
    if not os.path.exists(os.path.join(state_dir, "state.db")):
        return []
    backend = StateFactory.get_provider(conf).backend  # type: ignore[attr-defined]
    ours = {checkpoint_namespace(TOPOLOGY)} | {f"{TOPOLOGY}-count-{i}" for i in range(max(parallelism, 64))}
    dropped = []
    for ns in backend.namespaces():
        if ns in ours:
            backend.drop(ns)
            dropped.append(ns)
    return sorted(dropped)


def _cmd_demo(args: argparse.Namespace) -> int:
    from weir.runtime.spark.session import stop_spark

    try:
        return _demo(args)
    finally:
        if "pyspark" in sys.modules:
            stop_spark()  # the command owns the Spark it started: leave no JVM behind


def _demo(args: argparse.Namespace) -> int:
    import weir
    from weir.demo import generate_corpus, read_counts, wordcount_topology

    state_dir = os.path.abspath(args.state_dir)
    corpus = os.path.join(state_dir, "demo-corpus")
    conf: dict[str, Any] = {
        "weir.state.dir": state_dir,
        "weir.spark.master": args.master,
        "topology.state.provider": "sqlite",
    }
    if args.remote:  # a client of a Spark Connect server (on this machine: the store is a local file)
        del conf["weir.spark.master"]
        conf["weir.spark.remote"] = args.remote
    # a fresh demo every time: its corpus, its Spark checkpoint and its own namespaces
    dropped = _reset_previous_run(state_dir, conf, args.parallelism)
    if dropped:
        print(f"weir demo: reset the previous demo run (dropped {', '.join(dropped)}; nothing else is touched)")
    print(f"weir demo: generating {human_count(args.words)} words ({args.distinct} distinct) in {corpus}")
    expected = generate_corpus(corpus, args.words, args.distinct, args.files, args.seed)
    topo = wordcount_topology(corpus, parallelism=args.parallelism, files_per_batch=args.files_per_batch)
    print(
        f"weir demo: split -> count (fields grouping, parallelism {args.parallelism}) "
        f"on Spark {args.remote or args.master}, "
        f"state in sqlite:///{os.path.join(state_dir, 'state.db')}"
    )
    print(
        "weir demo: starting Spark; the first batch waits a few seconds for the JVM and its Python workers",
        flush=True,
    )
    t0 = time.time()
    run = weir.submit(TOPOLOGY, conf, topo)
    with Progress(run, unit="words", count=lambda st: st.components.get("count", {}).get("in", 0)):
        run.process_available()
    took = time.time() - t0
    st = run.status()
    got = read_counts(conf, TOPOLOGY, "count", args.parallelism)
    print()
    print_table(["rank", "word", "count"], [(i + 1, w, c) for i, (w, c) in enumerate(got.most_common(args.top))])
    print()
    ok = got == expected
    print(
        f"txid {st.last_txid} committed; {st.batches} batches; {human_count(sum(got.values()))} words counted in "
        f"{took:.1f}s ({human_count(sum(expected.values()) / max(took, 1e-9))} words/s incl. Spark start-up)"
    )
    if ok:
        print(f"verified: all {len(expected)} counts equal a plain Python Counter of the corpus")
        return 0
    diff = {w for w in set(got) | set(expected) if got[w] != expected[w]}
    print(
        f"MISMATCH: {len(diff)} words differ from a plain Python count, e.g. {sorted(diff)[:5]}",
        file=sys.stderr,
    )
    return 1


def register(subparsers: Any) -> None:
    """Add ``weir demo``."""
    p = subparsers.add_parser("demo", help="run the word-count demo on the embedded default store")
    p.add_argument("--words", type=int, default=200_000, help="words to generate (default 200000)")
    p.add_argument("--distinct", type=int, default=5_000, help="distinct words (default 5000)")
    p.add_argument("--files", type=int, default=8, help="input files (default 8)")
    p.add_argument("--files-per-batch", type=int, default=2, help="files per micro-batch (default 2)")
    p.add_argument("--parallelism", type=int, default=2, help="tasks of split and count (default 2)")
    p.add_argument("--state-dir", default=os.environ.get("WEIR_STATE_DIR", "./weir-state"), help="weir.state.dir")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    where.add_argument("--remote", metavar="URL", help="a Spark Connect server to run on, e.g. sc://127.0.0.1:15002")
    p.add_argument("--top", type=int, default=10, help="how many top words to print")
    p.add_argument("--seed", type=int, default=7, help="corpus seed")
    p.set_defaults(func=_cmd_demo)
