"""The word-count demo of seed 000: a corpus generator and the split + stateful count topology.

Used by ``weir demo``, ``examples/wordcount.py`` and the benchmarks.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

from weir.sources import FileSpout
from weir.state import KeyValueState
from weir.topology import BasicBolt, Fields, StatefulBolt, Topology, TopologyBuilder, Values

__all__ = [
    "SENTENCES",
    "SplitSentence",
    "WordCount",
    "generate_corpus",
    "input_dir_for",
    "read_counts",
    "wordcount_topology",
]

#: the sentences of Storm's ``RandomSentenceSpout``, the examples' sample input
SENTENCES = (
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
)


class SplitSentence(BasicBolt):
    """Splits a line into words."""

    def declare_output_fields(self, declarer: Any) -> None:
        """One field, ``word``."""
        declarer.declare(Fields("word"))

    def execute(self, tup: Any, collector: Any) -> None:
        """Emit every word of the line."""
        for word in tup.get_string(0).split():
            collector.emit(Values(word))


class WordCount(StatefulBolt[KeyValueState[str, int]]):
    """Counts words in a ``KeyValueState`` (seed 000's WordCountBolt)."""

    def declare_output_fields(self, declarer: Any) -> None:
        """``word``, ``count``."""
        declarer.declare(Fields("word", "count"))

    def init_state(self, state: Any) -> None:
        """Keep the task's state."""
        self.counts = state

    def execute(self, tup: Any) -> None:
        """Increment the word's count and emit it."""
        word = tup.get_string(0)
        count = self.counts.get(word, 0) + 1
        self.counts.put(word, count)
        self.collector.emit(Values(word, count), anchors=[tup])
        self.collector.ack(tup)


def wordcount_topology(input_dir: str, *, parallelism: int = 2, files_per_batch: int = 1) -> Topology:
    """Lines from ``input_dir`` → split (shuffle) → stateful count (fields grouping on ``word``)."""
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(input_dir, files_per_batch=files_per_batch))
    b.set_bolt("split", SplitSentence(), parallelism).shuffle_grouping("lines")
    b.set_bolt("count", WordCount(), parallelism).fields_grouping("split", Fields("word"))
    return b.create_topology()


def generate_corpus(
    directory: str, n_words: int = 200_000, n_distinct: int = 5_000, n_files: int = 8, seed: int = 7
) -> Counter[str]:
    """Write ``n_files`` text files of Zipf-distributed words; return the exact word counts."""
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(seed)
    vocab = [_word(rng, i) for i in range(n_distinct)]
    weights = [1.0 / (i + 1) ** 1.1 for i in range(n_distinct)]
    counts: Counter[str] = Counter()
    per_file = max(1, n_words // n_files)
    written = 0
    for f in range(n_files):
        n = per_file if f < n_files - 1 else n_words - written
        words = rng.choices(vocab, weights, k=n)
        counts.update(words)
        written += n
        tmp = os.path.join(directory, f".part-{f:05d}.txt.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for i in range(0, n, 12):
                fh.write(" ".join(words[i : i + 12]) + "\n")
        os.replace(tmp, os.path.join(directory, f"part-{f:05d}.txt"))
    return counts


def _word(rng: random.Random, i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) for _ in range(3 + i % 6)) + str(i)


def read_counts(conf: Mapping[str, Any], topology: str, component: str = "count", parallelism: int = 2) -> Counter[Any]:
    """The committed counts of every task namespace of ``component``."""
    from weir.state import StateFactory

    provider = StateFactory.get_provider(conf)
    got: Counter[Any] = Counter()
    for i in range(parallelism):
        state: Any = provider.new_state(f"{topology}-{component}-{i}", conf)
        for k, v in state:
            got[k] += v
    return got


def input_dir_for(example: str, given: str | None = None, conf: Mapping[str, Any] | None = None) -> str:
    """The input directory of an example: ``given``, else ``--conf input=DIR``, else ``./input``.

    When none of them exists yet, a small sample (Storm's sentences, 3 files) is written to
    ``<weir.state.dir>/examples/<example>-input`` and that directory is used, so an example runs on
    a fresh checkout as written. A directory that is given but missing is an error.
    """
    import sys

    from weir.errors import ConfigError
    from weir.state.config import default_state_dir

    conf = conf or {}
    chosen = given or conf.get("input") or os.environ.get("WORDCOUNT_INPUT")
    if chosen:
        if not os.path.isdir(str(chosen)):
            msg = f"{example}: input directory {chosen!r} does not exist (give an existing one: --conf input=DIR)"
            raise ConfigError(msg)
        return str(chosen)
    if os.path.isdir("input"):
        return os.path.abspath("input")
    sample = os.path.abspath(os.path.join(default_state_dir(conf), "examples", f"{example}-input"))
    if not os.path.isdir(sample):
        os.makedirs(sample, exist_ok=True)
        for f in range(3):
            tmp = os.path.join(sample, f".part-{f}.txt.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write("\n".join(SENTENCES[(f + i) % len(SENTENCES)] for i in range(20)) + "\n")
            os.replace(tmp, os.path.join(sample, f"part-{f}.txt"))
        print(f"{example}: no ./input and no --conf input=DIR: wrote a sample to {sample}", file=sys.stderr)
    return sample
