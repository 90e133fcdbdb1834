"""The change feed: committed change sets of the last N txids, kept beside the state they changed.

With ``weir.state.changelog.retain = N`` (default 0: off), every commit of a namespace also stores,
**in the same atomic step as the commit**, one row per changed key: the txid, the key, its value
before the commit (the *before-image*, None when the key was absent) and after it (None for a
delete), and removes the rows of txids up to ``txid - N``. So the feed is never unbounded, a crash
leaves it exactly as far as the commits went (no gap, no duplicate), and the state at any retained
txid can be rebuilt from the committed rows and the before-images.

Stores that keep it implement :class:`ChangelogBackend` (SQLite, PostgreSQL, Redis and Redis Cluster);
a topology that sets
``retain`` on another store is refused at submit (:func:`check_supported`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.errors import ConfigError

__all__ = ["RETAIN_KEY", "ChangeRow", "ChangelogBackend", "LogRange", "check_supported", "retain_of"]

#: the topology configuration key: txids whose change sets are kept (0 = off)
RETAIN_KEY = "weir.state.changelog.retain"


@dataclass(frozen=True)
class LogRange:
    """What a namespace's feed holds: txids ``since``.. (the first logged) and ``retain`` (how many)."""

    since: int
    retain: int


@dataclass(frozen=True)
class ChangeRow:
    """One logged change: ``before`` / ``after`` are serialized values, None for absent / deleted."""

    txid: int
    key: bytes
    before: bytes | None
    after: bytes | None


class ChangelogBackend(ABC):
    """A :class:`~weir.state.backend.Backend` that can keep the change feed (a mix-in)."""

    @abstractmethod
    def commit_logged(self, namespace: str, txid: int, epoch: int | None, retain: int) -> None:
        """:meth:`~weir.state.backend.Backend.commit_prepared`, logging the change set in the same atomic step.

        Steps, all in one transaction: check the epoch and the prepared txid; log every prepared
        key with its committed value before the commit and its new value; delete the logged txids
        up to ``txid - retain``; record the namespace's feed (first logged txid, ``retain``); then
        commit exactly as ``commit_prepared`` does.
        """

    @abstractmethod
    def log_range(self, namespace: str) -> LogRange | None:
        """What the namespace's feed holds, or None when it never logged."""

    @abstractmethod
    def log_changes(self, namespace: str, after_txid: int, upto_txid: int) -> list[ChangeRow]:
        """Logged changes of txids in (``after_txid``, ``upto_txid``], by txid then key."""


def retain_of(conf: Mapping[str, Any] | None) -> int:
    """``weir.state.changelog.retain`` of ``conf`` (0 when absent); a bad value raises :class:`ConfigError`."""
    raw = (conf or {}).get(RETAIN_KEY, 0)
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        msg = f"{RETAIN_KEY} must be a whole number of txids (0 = off), got {raw!r}"
        raise ConfigError(msg)
    try:
        n = int(raw)
    except ValueError as exc:
        msg = f"{RETAIN_KEY} must be a whole number of txids (0 = off), got {raw!r}"
        raise ConfigError(msg) from exc
    if n < 0:
        msg = f"{RETAIN_KEY} must be 0 (off) or more, got {n}"
        raise ConfigError(msg)
    return n


def check_supported(backend: Any, conf: Mapping[str, Any] | None, topology: str = "") -> int:
    """``retain`` of ``conf``, refused (at submit) when ``backend`` cannot keep a change feed."""
    n = retain_of(conf)
    if n and not isinstance(backend, ChangelogBackend):
        where = f"topology {topology!r}: " if topology else ""
        msg = (
            f"{where}{RETAIN_KEY} = {n} asks for a change feed, which the {getattr(backend, 'kind', '?')} store "
            f"({backend.describe()}) does not keep; use SQLite, PostgreSQL or Redis, or set {RETAIN_KEY} = 0"
        )
        raise ConfigError(msg)
    return n
