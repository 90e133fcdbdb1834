"""Where an operator task's checkpoints live: one namespace ``<topology>-<operator>-<task>``.

Layout (keys are bytes; any provider's :class:`~weir.state.backend.Backend`):

==========================  ===========  =====================================================
key                         written      content
==========================  ===========  =====================================================
``head``                    transaction  JSON :class:`Head`: the token of the batch that last
                                         committed this task, the retained checkpoints, the
                                         ones retired by that batch, the sequence counter
``c/<id>/<token>/<n>``      direct       chunk *n* of checkpoint *id* written by attempt *token*
``intents``                 direct       JSON ``{token: [id, chunks]}``: chunk sets written and
                                         not yet garbage-collected
``started``                 direct       the task ran at least once (so a later fresh instance
                                         gets ``reset_to_initial_state()``, not a first start)
==========================  ===========  =====================================================

Chunks are written once, directly (durable at once, unique per attempt); only the small ``head``
goes through the coordinator's prepare/commit. So the **latest complete checkpoint** is the last
one the committed head lists, a checkpoint is never half visible, and a commit costs the same for
1 KB and 100 MB. Chunk sets no committed head refers to (a failed attempt, a retired checkpoint)
are deleted by the task's next run (:meth:`TaskCheckpoints.collect_garbage`) and, for retired
ones, right after the commit by the driver.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from weir.errors import CheckpointError, StateError
from weir.state.backend import Backend
from weir.state.kv import TransactionalKeyValueState
from weir.state.serializers import BytesSerializer
from weir.streams.checkpoint import Checkpoint, iter_chunks

__all__ = ["CHUNK_BYTES", "CheckpointMeta", "Head", "TaskCheckpoints", "chunk_key", "load_checkpoint"]

HEAD = b"head"
INTENTS = b"intents"
STARTED = b"started"
#: checkpoint data is stored in pieces of this size (one row / hash field each)
CHUNK_BYTES = 4 * 1024 * 1024


def chunk_key(cid: int, token: str, n: int) -> bytes:
    """Key of chunk ``n`` of checkpoint ``cid`` written by attempt ``token``."""
    return b"c/%020d/%s/%06d" % (cid, token.encode("ascii"), n)


@dataclass(frozen=True)
class CheckpointMeta:
    """A stored checkpoint: id, time, attempt token, chunk count, size and CRC-32 of its bytes."""

    id: int
    timestamp: float
    token: str
    chunks: int
    size: int
    crc: int

    def to_json(self) -> list[Any]:
        """Compact JSON form."""
        return [self.id, self.timestamp, self.token, self.chunks, self.size, self.crc]

    @classmethod
    def from_json(cls, d: list[Any]) -> CheckpointMeta:
        """Parse :meth:`to_json`."""
        return cls(int(d[0]), float(d[1]), str(d[2]), int(d[3]), int(d[4]), int(d[5]))

    def keys(self) -> list[bytes]:
        """Keys of the chunks."""
        return [chunk_key(self.id, self.token, n) for n in range(self.chunks)]


@dataclass(frozen=True)
class Head:
    """The transactional record of one operator task."""

    token: str
    txid: int
    retained: tuple[CheckpointMeta, ...] = ()
    retired: tuple[CheckpointMeta, ...] = ()
    seq: int = 0
    region: bool = True

    @property
    def latest(self) -> CheckpointMeta | None:
        """The latest complete checkpoint, if any."""
        return self.retained[-1] if self.retained else None

    def to_bytes(self) -> bytes:
        """JSON, readable with ``weir state get``."""
        return json.dumps(
            {
                "v": 1,
                "token": self.token,
                "txid": self.txid,
                "retained": [m.to_json() for m in self.retained],
                "retired": [m.to_json() for m in self.retired],
                "seq": self.seq,
                "region": self.region,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Head:
        """Parse a stored head; damage raises :class:`CheckpointError`."""
        try:
            d = json.loads(data)
            return cls(
                token=str(d["token"]),
                txid=int(d["txid"]),
                retained=tuple(CheckpointMeta.from_json(m) for m in d.get("retained", [])),
                retired=tuple(CheckpointMeta.from_json(m) for m in d.get("retired", [])),
                seq=int(d.get("seq", 0)),
                region=bool(d.get("region", True)),
            )
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            msg = (
                f"{where}: the checkpoint record (key 'head') is corrupt ({type(exc).__name__}: {exc}); "
                "inspect it with `weir state get`, or drop the namespace to start the operator afresh"
            )
            raise CheckpointError(msg) from exc


@dataclass
class TaskCheckpoints:
    """Reads and writes the checkpoints of one operator task (executor or driver side)."""

    backend: Backend
    namespace: str
    where: str
    epoch: int | None = None
    #: chunk size in bytes (default: the module's CHUNK_BYTES at write time)
    chunk_bytes: int | None = None
    #: how checkpoint objects are stored: ``data`` (default) or ``pickle`` (trusts the store)
    serializer: str = "data"
    _kv: TransactionalKeyValueState | None = field(default=None, repr=False)

    @property
    def kv(self) -> TransactionalKeyValueState:
        """The transactional view used for ``head`` (raw bytes keys and values)."""
        if self._kv is None:
            self._kv = TransactionalKeyValueState(
                self.backend, self.namespace, BytesSerializer(), BytesSerializer(), epoch=self.epoch
            )
        return self._kv

    # ---- reads ---------------------------------------------------------------------------------
    def head(self) -> Head | None:
        """The committed head, or None when the task never committed."""
        data = self.backend.get(self.namespace, HEAD)
        return None if data is None else Head.from_bytes(data, self.where)

    def started(self) -> bool:
        """Whether the task ran before (in any process)."""
        return self.backend.get(self.namespace, STARTED) is not None

    def load(self, meta: CheckpointMeta) -> Checkpoint:
        """Read checkpoint ``meta`` back; missing or damaged data raises :class:`CheckpointError`."""
        what = f"checkpoint {meta.id} of {self.where} (namespace {self.namespace!r})"
        keys = meta.keys()
        got = self.backend.get_many(self.namespace, keys) if keys else []
        missing = [i for i, v in enumerate(got) if v is None]
        if missing:
            msg = (
                f"{what} is incomplete: chunk(s) {missing[:5]} of {meta.chunks} are missing from the "
                "store; it cannot be restored — restore the store from a backup or drop the namespace "
                "to start afresh"
            )
            raise CheckpointError(msg)
        data = b"".join(v for v in got if v is not None)
        if len(data) != meta.size or zlib.crc32(data) != meta.crc:
            msg = (
                f"{what} is corrupt: {len(data)} bytes with CRC-32 {zlib.crc32(data):08x}, but {meta.size} "
                f"bytes with CRC-32 {meta.crc:08x} were written; it cannot be restored — restore the "
                "store from a backup or drop the namespace to start afresh"
            )
            raise CheckpointError(msg)
        return Checkpoint.from_bytes(
            data,
            meta.id,
            meta.timestamp,
            where=f"{self.where} (namespace {self.namespace!r})",
            serializer=self.serializer,
        )

    def _intents(self) -> dict[str, list[int]]:
        data = self.backend.get(self.namespace, INTENTS)
        if data is None:
            return {}
        try:
            return {str(k): [int(v[0]), int(v[1])] for k, v in json.loads(data).items()}
        except (ValueError, TypeError, AttributeError, IndexError, KeyError):
            return {}  # a damaged intent log only costs garbage, never data

    # ---- writes --------------------------------------------------------------------------------
    def mark_started(self) -> None:
        """Record that the task ran (direct write)."""
        self.backend.write_direct(self.namespace, {STARTED: b"1"}, self.epoch)

    def write(self, ckpt: Checkpoint, token: str) -> CheckpointMeta:
        """Store ``ckpt``'s bytes as chunks of attempt ``token`` (durable now, visible after commit)."""
        parts = ckpt.to_parts()
        size = sum(memoryview(p).nbytes for p in parts)
        piece = self.chunk_bytes or CHUNK_BYTES
        n = max(1, -(-size // piece))
        intents = self._intents()
        intents[token + ":" + str(ckpt.sequence_id)] = [ckpt.sequence_id, n]
        self.backend.write_direct(self.namespace, {INTENTS: _dump(intents)}, self.epoch)
        crc = 0
        for i, chunk in enumerate(iter_chunks(parts, piece)):
            crc = zlib.crc32(chunk, crc)
            self.backend.write_direct(self.namespace, {chunk_key(ckpt.sequence_id, token, i): chunk}, self.epoch)
        return CheckpointMeta(ckpt.sequence_id, ckpt.timestamp, token, n, size, crc)

    def prepare(self, txid: int, head: Head) -> None:
        """Prepare ``head`` as transaction ``txid`` (committed by the coordinator)."""
        kv = self.kv
        kv.fence(self.epoch)
        kv.put(HEAD, head.to_bytes())
        kv.prepare_commit(txid)

    def delete(self, metas: Iterable[CheckpointMeta]) -> None:
        """Delete the chunks of ``metas`` (direct; idempotent)."""
        keys = [k for m in metas for k in m.keys()]
        for start in range(0, len(keys), 1000):
            self.backend.write_direct(self.namespace, dict.fromkeys(keys[start : start + 1000]), self.epoch)

    def collect_garbage(self, head: Head | None) -> int:
        """Delete chunk sets the committed ``head`` does not retain (failed attempts, retired ones).

        Call only when no attempt of this task is in flight (at the task's start). Returns the number
        of chunk sets deleted.
        """
        intents = self._intents()
        if not intents:
            return 0
        keep = {(m.token, m.id) for m in head.retained} if head else set()
        dead = []
        for name, (cid, n) in intents.items():
            token = name.rsplit(":", 1)[0]
            if (token, cid) not in keep:
                dead.append((name, CheckpointMeta(cid, 0.0, token, n, 0, 0)))
        if not dead:
            return 0
        self.delete(m for _, m in dead)
        for name, _ in dead:
            intents.pop(name)
        self.backend.write_direct(self.namespace, {INTENTS: _dump(intents)}, self.epoch)
        return len(dead)

    def commit(self, txid: int) -> None:
        """Commit prepared ``txid`` (idempotent; the coordinator's commit phase)."""
        kv = self.kv
        kv.fence(self.epoch)
        try:
            kv.commit(txid)
        except StateError as exc:
            msg = f"{self.where}: cannot commit checkpoint record of txid {txid}: {exc}"
            raise CheckpointError(msg) from exc

    def rollback(self) -> None:
        """Discard the prepared head (chunks become garbage)."""
        kv = self.kv
        kv.fence(self.epoch)
        kv.rollback()


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def load_checkpoint(
    provider: Any,
    topology: str,
    component: str,
    task: int = 0,
    checkpoint_id: int | None = None,
    *,
    serializer: str = "data",
) -> Checkpoint | None:
    """The latest complete checkpoint of an operator task (or the retained one with ``checkpoint_id``).

    ``provider`` is a :class:`~weir.state.factory.KeyValueStateProvider` or a store URL. Returns None
    when the task has no complete checkpoint (or ``checkpoint_id`` is not retained). ``serializer``
    is the topology's ``weir.streams.checkpoint.serializer`` (``pickle`` trusts the store).

    Example
    -------
    >>> ck = load_checkpoint("sqlite:///weir-state/state.db", "sorter", "window", 0)
    >>> ck is None  # the operator has not checkpointed yet; afterwards: ck.sequence_id, ck.read_object()
    True
    """
    from weir.state.factory import KeyValueStateProvider, StateFactory

    prov = StateFactory.from_url(provider) if isinstance(provider, str) else provider
    if not isinstance(prov, KeyValueStateProvider):
        msg = f"load_checkpoint needs a built-in provider or a store URL, got {type(provider).__qualname__}"
        raise CheckpointError(msg)
    store = TaskCheckpoints(
        prov.backend,
        f"{topology}-{component}-{task}",
        f"operator {component!r} task {task}",
        serializer=serializer,
    )
    head = store.head()
    if head is None:
        return None
    metas = [m for m in head.retained if checkpoint_id is None or m.id == checkpoint_id]
    return store.load(metas[-1]) if metas else None
