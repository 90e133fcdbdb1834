"""``Checkpoint``: what a :class:`~weir.streams.handler.StateHandler` writes its state into.

One checkpoint per operator task and checkpoint id. Every handler of the operator writes into the
same object in registration order and reads back in the same order on reset. Two ways to store
data, usable together:

* a **byte stream** — ``output_stream`` (writing) / ``input_stream`` (reading), plus
  ``write_object(obj)`` / ``read_object()`` that write plain-data objects one after the other (as
  Java's ``ObjectOutputStream`` does for serializable ones);
* a small **key-value** map — ``put(key, value)`` / ``get(key)``.

Objects and map values are plain data by default (None, bool, int, float, str, bytes, datetime,
date, Decimal, and tuples, lists, dicts and sets of them), in :mod:`weir.datacodec`'s encoding, which
never runs code when read. ``serializer="pickle"`` (the topology key
``weir.streams.checkpoint.serializer``) stores any picklable object instead, and so trusts everyone
who can write the store: a checkpoint is executed when it is restored.

Stored format: ``WEIRCKP2`` · codec byte (``d`` data, ``p`` pickle) · u64 stream length · stream ·
u64 map length · map. In the data codec, each ``write_object`` is ``D`` · u64 length · data. Version
1 (``WEIRCKP1``, always pickled) is read only with ``serializer="pickle"``; otherwise it is refused
with an error naming the checkpoint. The runtime stores it in chunks with a CRC-32; damaged data
raises :class:`~weir.errors.CheckpointError` naming the operator, task and checkpoint id.

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

from weir import datacodec as _data
from weir.errors import CheckpointError

__all__ = ["SERIALIZERS", "Checkpoint"]

MAGIC = b"WEIRCKP2"
MAGIC_V1 = b"WEIRCKP1"
_LEN = struct.Struct(">Q")
_OBJ = b"D"
#: values of ``weir.streams.checkpoint.serializer``
SERIALIZERS = ("data", "pickle")


class Checkpoint:
    """A checkpoint being written (``Checkpoint(id)``) or read back (``Checkpoint.from_bytes``).

    Parameters
    ----------
    sequence_id : the checkpoint id (the txid of the batch in a consistent region)
    timestamp : seconds since the epoch when it was taken (default: now)
    where : who it belongs to, for error messages (e.g. ``operator 'win' task 0``)
    serializer : ``data`` (default; plain data, never runs code when read) or ``pickle`` (any
        picklable object; trusts whoever can write the store)
    """

    def __init__(
        self, sequence_id: int, timestamp: float | None = None, *, where: str = "", serializer: str = "data"
    ) -> None:
        if serializer not in SERIALIZERS:
            msg = f"checkpoint serializer must be one of {SERIALIZERS}, got {serializer!r}"
            raise CheckpointError(msg)
        self._pickle = serializer == "pickle"
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
            msg = f"{self._what()} was read back: write to it only inside checkpoint(), read with input_stream"
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
        """Append ``obj`` (plain data, or pickled with the ``pickle`` serializer) to the stream."""
        out = self.output_stream
        try:
            if self._pickle:
                pickle.dump(obj, out, protocol=pickle.HIGHEST_PROTOCOL)
                return
            data = _data.encode(obj, what=f"{self._what()}: write_object")
        except _data.DataCodecError as exc:
            msg = (
                f"{exc}. Convert it to plain data in checkpoint() (and back in reset()), or set "
                "weir.streams.checkpoint.serializer = 'pickle' if everyone who can write the store is trusted"
            )
            raise CheckpointError(msg) from exc
        except Exception as exc:
            msg = f"{self._what()}: cannot write an object of type {type(obj).__qualname__}: {exc}"
            raise CheckpointError(msg) from exc
        out.write(_OBJ + _LEN.pack(len(data)) + data)

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
            if self._pickle:
                return pickle.load(src)  # noqa: S301 - opt-in: weir.streams.checkpoint.serializer = pickle
            head = src.read(1 + _LEN.size)
            if len(head) != 1 + _LEN.size or head[:1] != _OBJ:
                msg = f"no object written by write_object() starts here (first byte {head[:1]!r})"
                raise ValueError(msg)
            (n,) = _LEN.unpack(head[1:])
            body = src.read(n)
            if len(body) != n:
                msg = f"truncated object ({len(body)} of {n} bytes)"
                raise ValueError(msg)
            return _data.decode(body, what=f"{self._what()}, object at byte {pos}")
        except _data.DataCodecError as exc:
            raise CheckpointError(str(exc)) from exc
        except Exception as exc:
            msg = (
                f"{self._what()} cannot be read at byte {pos}: {type(exc).__name__}: {exc}; the data is "
                "corrupt or was written by a different version of the handler"
            )
            raise CheckpointError(msg) from exc

    # ---- key-value map -------------------------------------------------------------------------
    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (plain data, or any picklable object with ``pickle``) under ``key`` (writing only)."""
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
            if not self._map:
                kv = b""
            elif self._pickle:
                kv = pickle.dumps(self._map, protocol=pickle.HIGHEST_PROTOCOL)
            else:
                kv = _data.encode(self._map, what=f"{self._what()}: the key-value map")
        except _data.DataCodecError as exc:
            msg = (
                f"{exc}. Convert it to plain data, or set weir.streams.checkpoint.serializer = 'pickle' if "
                "everyone who can write the store is trusted"
            )
            raise CheckpointError(msg) from exc
        except Exception as exc:
            msg = f"{self._what()}: the key-value map cannot be pickled: {exc}"
            raise CheckpointError(msg) from exc
        stream = self._out.getbuffer()
        codec = b"p" if self._pickle else b"d"
        return [MAGIC + codec + _LEN.pack(len(stream)), stream, _LEN.pack(len(kv)), kv]

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
        serializer: str = "data",
    ) -> Checkpoint:
        """Parse the stored form; damaged data raises :class:`CheckpointError`.

        A pickled checkpoint (version 1, or codec ``p``) is read only with ``serializer="pickle"``;
        otherwise it is refused, naming the checkpoint, and nothing is unpickled.
        """
        ck = cls(sequence_id, timestamp, where=where, serializer=serializer)
        ck._out = None
        view = memoryview(data)
        magic = bytes(view[: len(MAGIC)])
        if magic == MAGIC and len(view) > len(MAGIC):
            codec = bytes(view[len(MAGIC) : len(MAGIC) + 1])
            start = len(MAGIC) + 1
        elif magic == MAGIC_V1:
            codec, start = b"p", len(MAGIC_V1)
        else:
            msg = f"{ck._what()} is corrupt: it does not start with the checkpoint header {MAGIC!r}"
            raise CheckpointError(msg)
        if codec not in (b"d", b"p"):
            msg = f"{ck._what()} is corrupt: unknown codec {codec!r} after the header"
            raise CheckpointError(msg)
        if codec == b"p" and not ck._pickle:
            msg = (
                f"{ck._what()} is stored pickled ({'an older weir format' if magic == MAGIC_V1 else 'codec p'}); "
                "weir never unpickles store data unless told to trust the store, so it was not read (nothing "
                "ran). If only trusted processes can write this store, set weir.streams.checkpoint.serializer "
                "= 'pickle'; otherwise drop the operator's namespace (weir state drop) to start it afresh"
            )
            raise CheckpointError(msg)
        ck._pickle = codec == b"p"
        head = start + _LEN.size
        if len(view) < head:
            msg = f"{ck._what()} is corrupt: truncated header ({len(view)} bytes)"
            raise CheckpointError(msg)
        (n_stream,) = _LEN.unpack(view[start:head])
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
            raw = view[end_stream + _LEN.size :]
            try:
                if ck._pickle:
                    ck._map = dict(pickle.loads(raw))  # noqa: S301 - opt-in, see the module docstring
                else:
                    m = _data.decode(raw, what="its key-value map")
                    if not isinstance(m, dict):
                        msg = f"the key-value map is a {type(m).__name__}"
                        raise TypeError(msg)
                    ck._map = m
            except _data.DataCodecError as exc:
                msg = f"{ck._what()} is corrupt: {exc}"
                raise CheckpointError(msg) from exc
            except Exception as exc:
                msg = f"{ck._what()} is corrupt: its key-value map cannot be read: {type(exc).__name__}: {exc}"
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
