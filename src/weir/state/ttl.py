"""Time-to-live of key-value state: the stored form of an expiring value and its expiry index.

A value written with a TTL is stored as ``MAGIC + expiry (8 bytes, big-endian ms) + serialized
value``; a value without one is stored exactly as before, so namespaces written before TTL existed
read unchanged. No serializer weir ships produces a value starting with ``MAGIC`` (JSON starts with a
printable character, pickle with ``0x80``, a msgpack object that starts with ``0x00`` is one byte).

**Time.** Expiry is decided from the *batch's own time*: the checkpoint coordinator records it in its
record with ``PREPARING(n)`` (``batch_ms``, ``batch_txid``) and reuses it when transaction *n* is
retried or replayed after a crash, so a replay sees exactly the same expiries. A key is live while its
expiry is **after** the batch time; a key whose expiry is at or before it is invisible to
``get``/iteration and is deleted by the commit of that batch (the sweep is part of the change set, so it
is atomic with the batch and recovery can never bring the key back).

**Index.** To find what expires without scanning the namespace, each namespace keeps reserved rows
(keys starting with :data:`RESERVED`): one per expiry bucket of :data:`BUCKET_MS` ms listing the
serialized keys written with an expiry in it, and a cursor (every bucket up to it has been swept). A
namespace whose cursor is missing (TTL used for the first time, or keys moved in by a rescale, a load
or a migration) or far behind is re-indexed by one scan. Readers that scan a namespace directly skip
reserved rows with :func:`is_reserved` and decode values with :func:`unwrap`.
"""

from __future__ import annotations

import datetime as _dt
import json
import struct
import time
from collections.abc import Iterable
from typing import Any

from weir.errors import ConfigError

__all__ = [
    "BUCKET_MS",
    "CURSOR_KEY",
    "MAGIC",
    "RESERVED",
    "TTL_CONF_KEY",
    "batch_time",
    "bucket_key",
    "count_user_rows",
    "decode_cursor",
    "decode_keys",
    "encode_cursor",
    "encode_keys",
    "expiry_of",
    "is_reserved",
    "now_for_namespace",
    "ttl_ms_of",
    "unwrap",
    "wrap",
]

MAGIC = b"\x00\xffweir-ttl\x00"
RESERVED = b"\x00\xffweir:ttl:"
CURSOR_KEY = RESERVED + b"cursor"
BUCKET_MS = 1000
#: a cursor more buckets than this behind the batch time is replaced by one scan of the namespace
MAX_BUCKET_GAP = 4096
TTL_CONF_KEY = "weir.state.ttl.ms"

_EXP = struct.Struct(">q")
_LEN = struct.Struct(">I")
_HEAD = len(MAGIC) + _EXP.size


def is_reserved(skey: bytes) -> bool:
    """Whether ``skey`` is one of weir's reserved TTL rows (not user data)."""
    return skey[:2] == b"\x00\xff" and bytes(skey).startswith(RESERVED)


def wrap(sval: bytes, expiry_ms: int) -> bytes:
    """The stored form of serialized value ``sval`` that expires at ``expiry_ms``."""
    return MAGIC + _EXP.pack(expiry_ms) + sval


def expiry_of(stored: bytes) -> int | None:
    """The expiry (ms) of a stored value, or None when it never expires."""
    if stored[:2] != b"\x00\xff" or not bytes(stored[: len(MAGIC)]) == MAGIC:
        return None
    return int(_EXP.unpack_from(stored, len(MAGIC))[0])


def unwrap(stored: bytes, now_ms: int | None) -> bytes | None:
    """The serialized value inside ``stored``; None when it expired at or before ``now_ms``.

    ``now_ms`` None: never treat it as expired (just strip the envelope).
    """
    exp = expiry_of(stored)
    if exp is None:
        return stored
    if now_ms is not None and exp <= now_ms:
        return None
    return bytes(stored[_HEAD:])


def bucket_key(bucket: int) -> bytes:
    """The reserved row listing the keys that expire in ``bucket``."""
    return RESERVED + b"b" + _EXP.pack(bucket)


def encode_keys(skeys: Iterable[bytes]) -> bytes:
    """Length-prefixed concatenation of serialized keys (the value of a bucket row)."""
    return b"".join(_LEN.pack(len(k)) + k for k in sorted(skeys))


def decode_keys(data: bytes) -> set[bytes]:
    """The serialized keys of a bucket row."""
    out: set[bytes] = set()
    i, n = 0, len(data)
    while i < n:
        (size,) = _LEN.unpack_from(data, i)
        i += _LEN.size
        out.add(bytes(data[i : i + size]))
        i += size
    return out


def ttl_ms_of(value: Any, where: str) -> int | None:
    """A TTL given as ms (int) or a :class:`datetime.timedelta`, validated; None for no TTL."""
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        ms = int(value.total_seconds() * 1000)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    elif isinstance(value, str) and value.strip().isdigit():
        ms = int(value)
    else:
        msg = f"{where}: a TTL must be a whole number of milliseconds or a datetime.timedelta, got {value!r}"
        raise ConfigError(msg)
    if ms <= 0:
        msg = f"{where}: a TTL must be positive, got {ms} ms (leave it unset for keys that never expire)"
        raise ConfigError(msg)
    return ms


def batch_time(backend: Any, topology: str | None) -> tuple[int | None, int]:
    """``(txid, batch_ms)`` recorded by the coordinator of ``topology``; wall-clock time when none is."""
    if topology:
        raw = backend.get(f"$checkpointspout-{topology}", b"__state")
        if raw is not None:
            try:
                rec = json.loads(raw)
                if rec.get("batch_ms") is not None:
                    txid = rec.get("batch_txid")
                    return (None if txid is None else int(txid)), int(rec["batch_ms"])
            except (ValueError, TypeError, AttributeError):
                pass
    return None, int(time.time() * 1000)


def encode_cursor(bucket: int) -> bytes:
    """The value of :data:`CURSOR_KEY`: every bucket up to ``bucket`` has been swept."""
    return _EXP.pack(bucket)


def decode_cursor(data: bytes) -> int:
    """The bucket a cursor row names."""
    return int(_EXP.unpack(bytes(data))[0])


def now_for_namespace(backend: Any, namespace: str, namespaces: Iterable[str] | None = None) -> int:
    """The time a reader outside a batch decides expiry at: the batch time of the namespace's topology.

    The topology is the one whose coordinator namespace (``$checkpointspout-<topology>``) is the longest
    prefix of ``<topology>-<component>-<task>``; wall-clock time when there is none.
    """
    prefix = "$checkpointspout-"
    best: str | None = None
    for ns in backend.namespaces() if namespaces is None else namespaces:
        if ns.startswith(prefix):
            topo = ns[len(prefix) :]
            if namespace.startswith(topo + "-") and (best is None or len(topo) > len(best)):
                best = topo
    return batch_time(backend, best)[1]


def count_user_rows(backend: Any, namespace: str) -> int:
    """Committed rows of ``namespace`` without weir's reserved TTL rows (what ``weir state ls`` shows).

    A namespace that never held an expiring key has no cursor row and is counted by the store; one
    that did is scanned once (its bucket rows are not counted).
    """
    if backend.get(namespace, CURSOR_KEY) is None:
        return int(backend.count(namespace))
    return sum(1 for k, _ in backend.scan(namespace) if not is_reserved(bytes(k)))
