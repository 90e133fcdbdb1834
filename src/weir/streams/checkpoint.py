"""``Checkpoint``: what a :class:`~weir.streams.handler.StateHandler` writes its state into.

One checkpoint per operator task and checkpoint id. Every handler of the operator writes into the
same object in registration order and reads back in the same order on reset. Two ways to store
data, usable together:

* a **byte stream** — ``output_stream`` (writing) / ``input_stream`` (reading), plus
  ``write_object(obj)`` / ``read_object()`` that pickle Python objects one after the other (as
  Java's ``ObjectOutputStream``);
* a small **key-value** map — ``put(key, value)`` / ``get(key)``.

Stored format (opaque, Python only): ``WEIRCKP1`` · u64 stream length · stream · u64 map length ·
pickled map. The runtime stores it in chunks with a CRC-32; damaged data raises
:class:`~weir.errors.CheckpointError` naming the operator, task and checkpoint id.

Example
-------
>>> ck = Checkpoint(3)
>>> ck.write_object({"count": 2}); ck.put("window", 7)
>>> back = Checkpoint.from_bytes(ck.to_bytes(), 3)
>>> back.read_object(), back.get("window")
({'count': 2}, 7)
"""

from __future__ import annotations

import io
import pickle
import struct
import time
from collections.abc import Iterator
from typing import Any, BinaryIO

from weir.errors import CheckpointError

__all__ = ["Checkpoint"]

MAGIC = b"WEIRCKP1"
_LEN = struct.Struct(">Q")


class Checkpoint:
    """A checkpoint being written (``Checkpoint(id)``) or read back (``Checkpoint.from_bytes``).

    Parameters
    ----------
    sequence_id : the checkpoint id (the txid of the batch in a consistent region)
    timestamp : seconds since the epoch when it was taken (default: now)
    where : who it belongs to, for error messages (e.g. ``operator 'win' task 0``)
    """

    def __init__(self, sequence_id: int, timestamp: float | None = None, *, where: str = "") -> None:
        self._id = int(sequence_id)
        self._ts = time.time() if timestamp is None else float(timestamp)
        self._where = where
        self._out: io.BytesIO | None = io.BytesIO()
        self._in: io.BytesIO | None = None
        self._map: dict[str, Any] = {}

    # ---- identity ------------------------------------------------------------------------------
    @property
    def sequence_id(self) -> int:
        """The checkpoint id."""
        return self._id

    @property
    def timestamp(self) -> float:
        """When it was taken (seconds since the epoch)."""
        return self._ts

    @property
    def writing(self) -> bool:
        """True while the checkpoint is being written, False when it was read back."""
        return self._out is not None

    def _what(self) -> str:
        return f"checkpoint {self._id}" + (f" of {self._where}" if self._where else "")

    def __repr__(self) -> str:
        mode = "writing" if self.writing else "reading"
        return f"Checkpoint(sequence_id={self._id}, {mode}{', ' + self._where if self._where else ''})"

    # ---- byte stream ---------------------------------------------------------------------------
    @property
    def output_stream(self) -> BinaryIO:
        """The binary stream to write the handler's data to (writing only)."""
        if self._out is None:
            msg = (
                f"{self._what()} was read back: write to it only inside checkpoint(), read with input_stream"
            )
            raise CheckpointError(msg)
        return self._out

    @property
    def input_stream(self) -> BinaryIO:
        """The binary stream to read the handler's data from (reading only)."""
        if self._in is None:
            msg = f"{self._what()} is being written: read it only inside reset(), write with output_stream"
            raise CheckpointError(msg)
        return self._in

    def write_object(self, obj: Any) -> None:
        """Append ``obj`` (pickled) to the stream."""
        out = self.output_stream
        try:
            pickle.dump(obj, out, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            msg = f"{self._what()}: cannot write an object of type {type(obj).__qualname__}: {exc}"
            raise CheckpointError(msg) from exc

    def read_object(self) -> Any:
        """Read the next object written with :meth:`write_object`."""
        src = self.input_stream
        pos = src.tell()
        if not src.read(1):
            msg = (
                f"{self._what()} has no more objects (read past the end at byte {pos}): the handlers "
                "read more than they wrote — check that reset() reads what checkpoint() writes, in order"
            )
            raise CheckpointError(msg)
        src.seek(pos)
        try:
            return pickle.load(src)  # noqa: S301 - weir's own checkpoint data
        except Exception as exc:
            msg = (
                f"{self._what()} cannot be read at byte {pos}: {type(exc).__name__}: {exc}; the data is "
                "corrupt or was written by a different version of the handler"
            )
            raise CheckpointError(msg) from exc

    # ---- key-value map -------------------------------------------------------------------------
    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (any picklable object) under ``key`` (writing only)."""
        if self._out is None:
            msg = f"{self._what()} was read back: put() only inside checkpoint()"
            raise CheckpointError(msg)
        if not isinstance(key, str):
            msg = f"{self._what()}: keys are strings, got {type(key).__name__} {key!r:.60}"
            raise CheckpointError(msg)
        self._map[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default``."""
        return self._map.get(key, default)

    def keys(self) -> list[str]:
        """Keys of the key-value map."""
        return list(self._map)

    def __contains__(self, key: object) -> bool:
        return key in self._map

    # ---- storage format ------------------------------------------------------------------------
    def to_parts(self) -> list[bytes | memoryview]:
        """The stored form as buffers (no copy of the stream); see the module docstring."""
        if self._out is None:
            msg = f"{self._what()} was read back and cannot be stored again"
            raise CheckpointError(msg)
        try:
            kv = pickle.dumps(self._map, protocol=pickle.HIGHEST_PROTOCOL) if self._map else b""
        except Exception as exc:
            msg = f"{self._what()}: the key-value map cannot be pickled: {exc}"
            raise CheckpointError(msg) from exc
        stream = self._out.getbuffer()
        return [MAGIC + _LEN.pack(len(stream)), stream, _LEN.pack(len(kv)), kv]

    def to_bytes(self) -> bytes:
        """The stored form as one ``bytes``."""
        return b"".join(bytes(p) if isinstance(p, memoryview) else p for p in self.to_parts())

    @property
    def size(self) -> int:
        """Bytes in the stream (written so far, or read back)."""
        if self._out is not None:
            return self._out.getbuffer().nbytes
        return len(self._in.getbuffer()) if self._in is not None else 0

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        sequence_id: int,
        timestamp: float | None = None,
        *,
        where: str = "",
    ) -> Checkpoint:
        """Parse the stored form; damaged data raises :class:`CheckpointError`."""
        ck = cls(sequence_id, timestamp, where=where)
        ck._out = None
        view = memoryview(data)
        head = len(MAGIC) + _LEN.size
        if len(view) < head or bytes(view[: len(MAGIC)]) != MAGIC:
            msg = f"{ck._what()} is corrupt: it does not start with the checkpoint header {MAGIC!r}"
            raise CheckpointError(msg)
        (n_stream,) = _LEN.unpack(view[len(MAGIC) : head])
        end_stream = head + n_stream
        if end_stream + _LEN.size > len(view):
            msg = f"{ck._what()} is corrupt: truncated ({len(view)} bytes, the stream alone needs {n_stream})"
            raise CheckpointError(msg)
        (n_kv,) = _LEN.unpack(view[end_stream : end_stream + _LEN.size])
        if end_stream + _LEN.size + n_kv != len(view):
            msg = f"{ck._what()} is corrupt: its length {len(view)} does not match its header"
            raise CheckpointError(msg)
        ck._in = io.BytesIO(view[head:end_stream])
        if n_kv:
            try:
                ck._map = dict(pickle.loads(view[end_stream + _LEN.size :]))  # noqa: S301
            except Exception as exc:
                msg = (
                    f"{ck._what()} is corrupt: its key-value map cannot be read: {type(exc).__name__}: {exc}"
                )
                raise CheckpointError(msg) from exc
        return ck


def iter_chunks(parts: list[bytes | memoryview], size: int) -> Iterator[bytes]:
    """Cut the concatenation of ``parts`` into pieces of ``size`` bytes (the last may be shorter)."""
    buf = bytearray()
    for part in parts:
        view = memoryview(part).cast("B")
        pos = 0
        while pos < len(view):
            take = min(size - len(buf), len(view) - pos)
            if not buf and take == size:
                yield bytes(view[pos : pos + take])
            else:
                buf += view[pos : pos + take]
                if len(buf) == size:
                    yield bytes(buf)
                    buf = bytearray()
            pos += take
    if buf:
        yield bytes(buf)
