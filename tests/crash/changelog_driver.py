"""A driver of the change feed the crash tests SIGKILL (see WEIR_CRASH_AT): the real coordinator, no Spark.

Usage: python changelog_driver.py PROVIDER_URL TXIDS RETAIN [WIDE COMMIT_CHUNK]

Each txid's job updates a two-task word count (:func:`words_of`, a word ``-w`` deletes ``w``) through
``TransactionalKeyValueState`` with ``weir.state.changelog.retain = RETAIN``; the coordinator
prepares, commits and recovers exactly as for a topology on Spark. With ``WIDE``, each txid also
counts ``WIDE`` more words, and a Redis store commits in scripts of ``COMMIT_CHUNK`` entries, so a
SIGKILL can land between the chunks of one namespace's commit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from weir._util import stable_hash
from weir.checkpoint.coordinator import CheckpointStore, Coordinator, JobOutcome, Participants
from weir.state import StateFactory

TOPOLOGY = "feedwc"
TASKS = 2


def words_of(txid: int, wide: int = 0) -> list[str]:
    """The words of txid ``txid`` (deterministic; every third txid deletes one), plus ``wide`` more."""
    words = [f"w{(txid * 7 + i * 3) % 11}" for i in range(5)] + [f"x{(txid + i) % (wide + 7)}" for i in range(wide)]
    if txid % 3 == 0:
        words.append(f"-w{(txid * 5) % 11}")
    return words


def namespace(task: int) -> str:
    return f"{TOPOLOGY}-count-{task}"


def main() -> int:
    url, txids, retain = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    wide = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    provider = StateFactory.from_url(url)
    if len(sys.argv) > 5:
        provider.backend.commit_chunk = int(sys.argv[5])  # type: ignore[attr-defined]  # Redis only
    conf = {"weir.state.changelog.retain": retain}

    class Tasks(Participants):
        def commit_all(self, txid: int, epoch: int, after_first: Callable[[], None] | None = None) -> None:
            for t in range(TASKS):
                s = provider.new_state(namespace(t), conf)
                s.fence(epoch)
                s.commit(txid)
                if t == 0 and after_first is not None:
                    after_first()

        def rollback_all(self, epoch: int, after_first: Callable[[], None] | None = None) -> None:
            for t in range(TASKS):
                s = provider.new_state(namespace(t), conf)
                s.fence(epoch)
                s.rollback()
                if t == 0 and after_first is not None:
                    after_first()

    def job(txid: int, epoch: int, attempt: int) -> JobOutcome:
        states = [provider.new_state(namespace(t), conf) for t in range(TASKS)]
        for s in states:
            s.fence(epoch)
        for w in words_of(txid, wide):
            s = states[stable_hash(w.lstrip("-")) % TASKS]
            if w.startswith("-"):
                s.delete(w[1:])
            else:
                s.put(w, s.get(w, 0) + 1)
        for s in states:
            s.prepare_commit(txid)
        return JobOutcome()

    coord = Coordinator(TOPOLOGY, CheckpointStore(provider.backend, TOPOLOGY), Tasks(), {"count": TASKS})
    coord.start()
    for batch_id in range(txids):
        coord.run_batch("query", batch_id, job)
    print(f"DONE txid={txids}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
