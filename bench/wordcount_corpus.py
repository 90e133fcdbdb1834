"""A deterministic word-count corpus: text files of lines of words with a Zipf-like distribution.

Used by the word-count benchmarks (``bench/storm_wordcount.py``) and by ``weir demo``. The same
arguments always give byte-identical files and the same counts, on any machine and Python ≥ 3.11.

* The vocabulary has exactly ``n_distinct`` words; word *r* (rank *r*, most frequent first) is
  spelled from consonant-vowel syllables in bijective base 85, so frequent words are short and every
  word is distinct, lower-case ASCII.
* Every vocabulary word occurs at least once; the remaining ``n_words - n_distinct`` occurrences are
  drawn with weight ``1 / (r + 1) ** zipf_s``. The order is shuffled.
* Words are separated by one space, lines hold 4 to 16 words, no line is empty, and every file
  ends with a newline, so ``line.split()`` (Python) and ``split(value, ' ')`` (Spark SQL) agree.
* Files are ``part-00000.txt``, ``part-00001.txt``, ... Each is written under a hidden temporary
  name and renamed into place, so a streaming reader watching the directory never sees half a file.

Run as a script to write a corpus and print its top words::

    python bench/wordcount_corpus.py /tmp/corpus --words 100000 --distinct 5000 --files 4
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import random
from pathlib import Path

__all__ = ["corpus_files", "generate_corpus", "vocabulary", "word_for_rank"]

_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]  # 85 syllables
_MIN_LINE, _MAX_LINE = 4, 16


def word_for_rank(rank: int) -> str:
    """The vocabulary word of ``rank`` (0 = most frequent), e.g. ``0 -> 'ba'``, ``85 -> 'baba'``.

    Bijective base-85 numeration over syllables: a one-to-one map from ranks to words.
    """
    if rank < 0:
        msg = f"word_for_rank: rank must be ≥ 0, got {rank}"
        raise ValueError(msg)
    n = rank + 1
    parts: list[str] = []
    base = len(_SYLLABLES)
    while n > 0:
        n, digit = divmod(n - 1, base)
        parts.append(_SYLLABLES[digit])
    return "".join(reversed(parts))


def vocabulary(n_distinct: int) -> list[str]:
    """The first ``n_distinct`` words, most frequent first."""
    return [word_for_rank(r) for r in range(n_distinct)]


def corpus_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The corpus files in ``directory``, in name order."""
    return sorted(Path(directory).glob("part-*.txt"))


def _check(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"generate_corpus: {name} must be an integer ≥ {minimum}, got {value!r}"
        raise ValueError(msg)


def generate_corpus(
    directory: str | os.PathLike[str],
    n_words: int = 2_000_000,
    n_distinct: int = 20_000,
    n_files: int = 20,
    seed: int = 42,
    *,
    zipf_s: float = 1.0,
) -> collections.Counter[str]:
    """Write ``n_files`` text files with ``n_words`` words in total into ``directory``.

    Parameters
    ----------
    directory : where the files go (created if missing); existing ``part-*.txt`` files are removed
        first so the directory holds exactly this corpus
    n_words : total number of words (≥ ``n_distinct``)
    n_distinct : size of the vocabulary; each word occurs at least once
    n_files : number of files; words are spread evenly, in order, over them
    seed : seed of the private random generator (the global one is not touched)
    zipf_s : exponent of the rank-frequency law (1.0 = classic Zipf)

    Returns
    -------
    collections.Counter
        The exact number of occurrences of every word in the written files.

    Examples
    --------
    >>> counts = generate_corpus("/tmp/wc-in", n_words=1000, n_distinct=50, n_files=2, seed=1)
    >>> sum(counts.values()), len(counts)
    (1000, 50)
    """
    _check("n_distinct", n_distinct, 1)
    _check("n_words", n_words, n_distinct)
    _check("n_files", n_files, 1)
    _check("seed", seed, 0)
    if not zipf_s >= 0:
        msg = f"generate_corpus: zipf_s must be ≥ 0, got {zipf_s!r}"
        raise ValueError(msg)
    rng = random.Random(seed)
    vocab = vocabulary(n_distinct)
    cum = list(itertools.accumulate(1.0 / (r + 1) ** zipf_s for r in range(n_distinct)))
    words = vocab + rng.choices(vocab, cum_weights=cum, k=n_words - n_distinct)
    rng.shuffle(words)

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for old in corpus_files(out):
        old.unlink()
    per_file, extra = divmod(n_words, n_files)
    start = 0
    for i in range(n_files):
        end = start + per_file + (1 if i < extra else 0)
        _write_file(out / f"part-{i:05d}.txt", words[start:end], rng)
        start = end
    return collections.Counter(words)


def _write_file(path: Path, words: list[str], rng: random.Random) -> None:
    lines: list[str] = []
    i = 0
    while i < len(words):
        n = rng.randint(_MIN_LINE, _MAX_LINE)
        lines.append(" ".join(words[i : i + n]))
        i += n
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="ascii")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    """Command line: write a corpus and print its size and top words."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("directory")
    p.add_argument("--words", type=int, default=2_000_000)
    p.add_argument("--distinct", type=int, default=20_000)
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)
    counts = generate_corpus(args.directory, args.words, args.distinct, args.files, args.seed)
    print(f"{sum(counts.values())} words, {len(counts)} distinct, in {args.files} files under {args.directory}")
    for word, n in counts.most_common(10):
        print(f"{word:>12} {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
