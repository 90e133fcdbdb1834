"""A process committing into a SQLite store with a small merge threshold (for test_sqlite_delta.py).

``python sqlite_merge_driver.py DB FIRST LAST`` prepares and commits txids FIRST..LAST of namespace
``m``; txid t rewrites keys ``k{t*7 % 50 .. +9}`` to ``t``, deletes ``k{t % 50}`` and adds
``new{t}``. With ``mergeRows`` 25 the delta is merged every few commits; a crash point
(``WEIR_CRASH_AT=sqlite_before_merge@T`` or ``sqlite_during_merge@T``) kills the process there.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))

from weir.connectors.sqlite import SqliteBackend, SqliteOptions  # noqa: E402


def changes(t: int) -> dict[bytes, bytes | None]:
    """The change set of txid ``t``."""
    out: dict[bytes, bytes | None] = {b"k%02d" % ((t * 7 + i) % 50): b"%d" % t for i in range(10)}
    out[b"k%02d" % (t % 50)] = None
    out[b"new%d" % t] = b"%d" % t
    return out


def main() -> None:
    db, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    backend = SqliteBackend.open(SqliteOptions(db, merge_rows=25))
    rec = backend.txids("m")
    if rec.prepared is not None:  # recovery: roll forward what was prepared
        backend.commit_prepared("m", rec.prepared, None)
    for t in range(first, last + 1):
        if rec.committed is not None and t <= rec.committed:
            continue
        backend.write_prepared("m", t, changes(t), None)
        backend.commit_prepared("m", t, None)
    print("DONE", backend.txids("m").committed)


if __name__ == "__main__":
    main()
