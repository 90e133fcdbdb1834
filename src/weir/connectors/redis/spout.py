"""``RedisStreamSpout``: Redis Streams read by entry-id range (``XRANGE``), one partition per stream.

Offsets
-------
One entry per stream: ``{"events": {"id": "1700000000000-3", "n": 120}}`` — ``id`` is the last
entry of the range, ``n`` its ordinal in the stream's history (Redis' ``entries-added`` counter
as it stood when that entry was added), when known. A batch is the range ``(start id, end id]``.

Detecting trimmed ranges
------------------------
With both ordinals known, a range must hold exactly ``end n - start n`` entries; fewer means
entries were trimmed away (``MAXLEN``/``MINID``) or deleted (``XDEL``) before the batch read them.
Ordinals are known whenever no ``XDEL`` touched the stream's current window (the normal case of a
capped stream). Otherwise the spout still notices a range whose last entry is gone or that
contains the stream's largest deleted id. A ``TRANSACTIONAL`` spout then fails the batch with a
:class:`~weir.errors.SourceError` naming the stream and the ids; an ``OPAQUE`` spout logs a
warning and continues with the entries that are left.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weir._util import positive_float, positive_int
from weir.errors import ConfigError, SourceError, StoreUnavailableError, TransientSourceError
from weir.sources.replayable import Offset, ReadLimit, ReplayableSpout
from weir.sources.schema import Column, converter, parse_columns
from weir.topology.components import Guarantee

if TYPE_CHECKING:
    from weir.connectors.redis.client import RedisSettings

__all__ = ["RedisStreamSpout"]

log = logging.getLogger("weir.sources")

_MIN_PART_RECORDS = 5000  # fewer entries per sub-range are not worth another Spark task
_MIN_MARK_EVERY = 500  # split marks: at most one per this many entries

#: one client per server and process (executors reuse their Python workers)
_CLIENTS: dict[RedisSettings, Any] = {}


def _transient(exc: BaseException) -> bool:
    """Worth retrying: a refused or dropped connection, a timeout, a server still loading its AOF.

    A refused password, a wrong server mode or a bad reply is permanent (never retried).
    """
    from weir.connectors.redis.client import REDIS_ERRORS, unreachable

    return isinstance(exc, StoreUnavailableError) or (isinstance(exc, REDIS_ERRORS) and unreachable(exc))


def _response_error() -> type[Exception]:
    import redis.exceptions as rexc

    return rexc.ResponseError


Id = tuple[int, int]


def _parse_id(text: str | bytes) -> Id:
    s = text.decode() if isinstance(text, bytes) else text
    ms, _, seq = s.partition("-")
    return int(ms), int(seq or 0)


def _fmt(i: Id) -> str:
    return f"{i[0]}-{i[1]}"


class RedisStreamSpout(ReplayableSpout):
    """Entries of one or more Redis streams, read exactly once per committed batch.

    Parameters
    ----------
    url : ``redis://[:password@]host:port/db`` or ``redis+cluster://h1:p1,h2:p2``
    streams : stream key(s) to read; each is one Spark partition of a batch
    fields : entry fields to emit, in order (a missing field is a null); all ``STRING`` unless
        ``schema`` gives types
    schema : DDL of the entry fields, e.g. ``"user STRING, amount BIGINT"`` (values are parsed
        from the entry's text; one that does not parse marks the record malformed)
    start : ``"0"`` (default: everything in the stream), ``"$"`` (only entries added after the
        topology first starts) or an entry id (entries after it)
    max_records_per_batch, max_bytes_per_batch : back-pressure per batch (all streams together)
    guarantee : ``TRANSACTIONAL`` (default: a trimmed range fails the batch) or ``OPAQUE``
        (a trimmed range is logged and the batch continues with what is left)
    stream_field, id_field : also emit the stream key / entry id under these field names
    page_size : entries per ``XRANGE`` call
    read_partitions : sub-ranges a stream's batch is read in, in parallel, when the planner has
        seen its entries (a limited batch of at least 5000 entries per sub-range)
    prefetch : with a records or bytes limit, count the next batch inside Redis while the current
        one runs (the count is used only if it filled the batch; otherwise it is made again)
    connect_timeout_s : how long to retry an unreachable or loading server before failing

    Examples
    --------
    >>> spout = RedisStreamSpout("redis://127.0.0.1:6379/0", streams=["clicks"],
    ...                          fields=["user", "page"], max_records_per_batch=10_000)
    """

    def __init__(
        self,
        url: str,
        streams: str | Sequence[str],
        fields: Sequence[str] | None = None,
        schema: str | None = None,
        *,
        start: str = "0",
        max_records_per_batch: int | None = None,
        max_bytes_per_batch: int | None = None,
        guarantee: Guarantee = Guarantee.TRANSACTIONAL,
        stream_field: str | None = None,
        id_field: str | None = None,
        page_size: int = 5000,
        read_partitions: int = 2,
        prefetch: bool = True,
        connect_timeout_s: float = 10.0,
    ) -> None:
        try:
            from weir.connectors.redis.client import RedisSettings
        except ImportError as exc:  # pragma: no cover - packaging
            msg = "RedisStreamSpout needs redis-py: pip install 'weir[redis]'"
            raise ConfigError(msg) from exc
        self.settings = RedisSettings.from_url(url)
        names = [streams] if isinstance(streams, str) else list(streams)
        if not names or not all(isinstance(s, str) and s for s in names) or len(set(names)) != len(names):
            msg = f"RedisStreamSpout: streams must be one or more distinct non-empty keys, got {streams!r}"
            raise ConfigError(msg)
        self.streams = names
        if not isinstance(guarantee, Guarantee):
            msg = f"RedisStreamSpout: guarantee must be a weir.topology.Guarantee, got {guarantee!r}"
            raise ConfigError(msg)
        self.guarantee = guarantee
        if start in ("0", "0-0", "-"):
            self.start = "0"
        elif start == "$":
            self.start = "$"
        else:
            try:
                self.start = _fmt(_parse_id(start))
            except ValueError as exc:
                msg = f"RedisStreamSpout: start must be '0', '$' or an entry id like '1700000000000-0', got {start!r}"
                raise ConfigError(msg) from exc
        self.page_size = positive_int(page_size, "RedisStreamSpout: page_size")
        self.read_partitions = positive_int(read_partitions, "RedisStreamSpout: read_partitions")
        self._splits: dict[str, tuple[str, str, list[dict[str, Any]]]] = {}
        self._prefetched: tuple[str, threading.Thread, dict[str, Any]] | None = None
        self.prefetch = bool(prefetch)
        self.connect_timeout_s = positive_float(
            connect_timeout_s, "RedisStreamSpout: connect_timeout_s", expected="a positive number of seconds"
        )
        self.max_records_per_batch = max_records_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch
        self.entry_columns = parse_columns(schema, fields, where=self.describe())
        meta = [Column(n, "STRING") for n in (stream_field, id_field) if n]
        self.stream_field = stream_field
        self.id_field = id_field
        self._columns = parse_columns(
            ", ".join(f"{c.name} {c.type}" for c in self.entry_columns + meta), None, where=self.describe()
        )
        self.fields = [c.name for c in self._columns]
        self.corrupt_column = True
        self.read_limit()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_splits"] = {}  # planner-local hints
        state["_prefetched"] = None
        return state

    def describe(self) -> str:
        """``RedisStreamSpout(redis://host:port/db, streams=[...])`` (no password)."""
        return f"RedisStreamSpout({self.settings.describe()}, streams={self.streams})"

    def columns(self) -> list[Column]:
        """Entry fields, then the stream / id fields if asked for."""
        return list(self._columns)

    # ---- connections -----------------------------------------------------------------------
    def _call(self, fn: Callable[[Any], Any], what: str) -> Any:
        """Run ``fn(client)``, retrying connection failures and a loading server for a while."""
        from weir.connectors.redis.client import redis_client

        deadline = time.monotonic() + self.connect_timeout_s
        delay = 0.05
        while True:
            client = _CLIENTS.get(self.settings)
            try:
                if client is None:
                    client = redis_client(self.settings, at_submit=False)
                    client.set_response_callback("XRANGE", _raw_reply)  # pages are converted column by column
                    _CLIENTS[self.settings] = client
                return fn(client)
            except Exception as exc:
                if not _transient(exc):
                    raise
                _CLIENTS.pop(self.settings, None)
                if time.monotonic() + delay > deadline:
                    msg = f"{self.describe()}: {what} failed: {self.settings.scrub(str(exc))}"
                    raise TransientSourceError(msg) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _info(self, pipe_results: Any) -> dict[str, Any] | None:
        if isinstance(pipe_results, _response_error()):
            if "no such key" in str(pipe_results).lower():
                return None
            raise pipe_results
        if isinstance(pipe_results, Exception):
            raise pipe_results
        return dict(pipe_results)

    # ---- offsets ---------------------------------------------------------------------------
    def initial_offset(self) -> Offset:
        """Per stream: before the first entry (``start="0"``), the current end (``"$"``) or the given id."""

        def run(client: Any) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for s in self.streams:
                pipe.xinfo_stream(s)
            return list(pipe.execute(raise_on_error=False))

        infos = self._call(run, "reading the streams' state")
        out: Offset = {}
        for s, raw in zip(self.streams, infos, strict=True):
            info = self._info(raw)
            if self.start == "$":
                out[s] = {"id": "0-0", "n": 0} if info is None else _at_end(info)
            elif self.start == "0":
                out[s] = {"id": "0-0", "n": 0} if info is None else _before_head(info)
            else:
                out[s] = {"id": self.start}
        return out

    def _start_for(self, start: Offset, s: str, end: Offset | None = None) -> dict[str, Any] | None:
        """The start position of stream ``s``; a stream new to the configuration starts per ``start``."""
        pos = start.get(s)
        if isinstance(pos, dict) and "id" in pos:
            return pos
        if self.start == "$":
            return end.get(s) if end is not None else None  # begins at the end of its first batch
        return {"id": "0-0"} if self.start == "0" else {"id": self.start}

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """Per stream the last entry, or — with a limit — the last entry a fair share admits."""
        if limit.unlimited:
            return self._latest_all(start)
        return self._latest_limited(start, limit)

    def _latest_all(self, start: Offset) -> Offset:
        def run(client: Any) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for s in self.streams:
                pipe.xinfo_stream(s)
            return list(pipe.execute(raise_on_error=False))

        infos = self._call(run, "reading the streams' last entries")
        out: Offset = {}
        for s, raw in zip(self.streams, infos, strict=True):
            info = self._info(raw)
            pos = self._start_for(start, s)
            if pos is None:  # start="$" and the stream is new: begin at its current end
                out[s] = {"id": "0-0", "n": 0} if info is None else _at_end(info)
                continue
            self._check_not_reset(s, pos, info)
            last = info.get("last-entry") if info else None
            if info is None or not last or _parse_id(last[0]) <= _parse_id(pos["id"]):
                out[s] = pos
                continue
            end: dict[str, Any] = {"id": _fmt(_parse_id(last[0]))}
            if "entries-added" in info and last[0] == info.get("last-generated-id"):
                end["n"] = int(info["entries-added"])
            out[s] = end
        return out

    def _latest_limited(self, start: Offset, limit: ReadLimit) -> Offset:
        """The batch's end under ``limit``; uses the count made ahead of time for this start when it is valid."""
        plan = self._take_prefetched(start, limit)
        if plan is None:
            plan = self._plan_limited(start, limit)
        if plan.full and self.prefetch:
            self._prefetch_next(plan.end, limit)
        self._remember_splits(start, plan.end, plan.counted, plan.cuts)
        return plan.end

    def _check_not_reset(self, s: str, pos: dict[str, Any], info: dict[str, Any] | None) -> None:
        """Refuse a committed position the stream no longer has: deleted, or deleted and created again.

        Entry ids only grow and ``entries-added`` only counts up, so a stream whose last generated id or
        whose count of added entries is below the committed position is another stream under the same
        key; the entries after the position are not the ones this topology counted on.
        """
        committed = _parse_id(pos["id"])
        if committed == (0, 0):
            return  # nothing read yet: a missing stream is one that does not exist yet
        where = f"{self.describe()}: Redis stream {s!r}"
        remedy = (
            "its ids now mean other entries, so weir neither skips nor re-reads them silently. To read the "
            "stream as it is now, run the topology on a new Spark checkpoint (weir.spark.checkpoint.location) "
            "or under a new spout id; to go on where it was, restore the stream (its entries and ids)"
        )
        if info is None:
            msg = f"{where} was deleted under the committed position {pos['id']}; {remedy}"
            raise SourceError(msg)
        last = info.get("last-generated-id")
        added = info.get("entries-added")
        if last is not None and _parse_id(last) < committed:
            found = f"its last generated id is {_text(last)}"
        elif added is not None and "n" in pos and int(added) < int(pos["n"]):
            found = f"it has had {int(added)} entries added in all, the committed position is entry {pos['n']}"
        else:
            return
        msg = (
            f"{where} was deleted and created again (or reset with XSETID) under the committed position "
            f"{pos['id']}: {found}; {remedy}"
        )
        raise SourceError(msg)

    def _take_prefetched(self, start: Offset, limit: ReadLimit) -> _Plan | None:
        """The plan counted in the background for ``(start, limit)``, if it filled the batch."""
        pending, self._prefetched = self._prefetched, None
        if pending is None:
            return None
        key, thread, box = pending
        if key != _plan_key(start, limit):
            return None
        thread.join()
        plan = box.get("plan")
        # a full batch's end depends only on entries that existed when it was counted; a batch
        # that reached the stream's end may have more to take now, so count it afresh
        return plan if isinstance(plan, _Plan) and plan.full else None

    def _prefetch_next(self, end: Offset, limit: ReadLimit) -> None:
        """Count the next batch (after ``end``) in the background while this one runs."""
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["plan"] = self._plan_limited(end, limit)
            except Exception as exc:  # used only if valid: the next call counts afresh
                box["error"] = exc

        thread = threading.Thread(target=work, name="weir-redis-prefetch", daemon=True)
        thread.start()
        self._prefetched = (_plan_key(end, limit), thread, box)

    def _plan_limited(self, start: Offset, limit: ReadLimit) -> _Plan:
        """Count entries inside Redis to find the batch's end, fairly shared among the streams."""
        records = limit.max_records if limit.max_records is not None else math.inf
        nbytes = limit.max_bytes if limit.max_bytes is not None else -1
        out: Offset = {}
        cursor: dict[str, dict[str, Any]] = {}
        for s in self.streams:
            pos = self._start_for(start, s)
            if pos is None:  # start="$" and the stream is new: begin at its current end
                out[s] = self._end_now(s)
            else:
                cursor[s] = dict(pos)
        if cursor:

            def run(client: Any) -> list[Any]:
                pipe = client.pipeline(transaction=False)
                for name in cursor:
                    pipe.xinfo_stream(name)
                return list(pipe.execute(raise_on_error=False))

            for name, raw in zip(cursor, self._call(run, "reading the streams' state"), strict=True):
                self._check_not_reset(name, cursor[name], self._info(raw))
        lefts: dict[str, int] | None = None
        if limit.max_bytes is None:
            lefts = self._left(cursor)
            left = None if lefts is None else sum(lefts.values())
            if left is not None and left <= records and (self.read_partitions < 2 or left < 2 * _MIN_PART_RECORDS):
                return _Plan(self._latest_all(start), {}, {}, full=False)  # fits one read: no need to count
            # otherwise count inside Redis: it finds the batch's end and the split points of parallel reads
        active = list(cursor)
        taken = 0
        spent = False
        cuts: dict[str, list[tuple[int, dict[str, Any]]]] = {s: [] for s in cursor}
        every = {}  # split marks: several per sub-range, so that the cuts come out nearly even
        for s in cursor:
            expect = records if lefts is None else min(records, lefts[s])
            expect = 100_000 if expect == math.inf else int(expect)
            every[s] = max(_MIN_MARK_EVERY, expect // (8 * max(1, self.read_partitions)))
        counted = dict.fromkeys(cursor, 0)
        while active and records > 0 and nbytes != 0:
            share = int(min(self.page_size * 20, math.ceil(records / len(active)) if records != math.inf else 10**9))
            still = []
            for s in active:
                want = int(min(share, records))
                k, last, used, more, full, marks, info = self._scan(
                    s, cursor[s]["id"], want, nbytes, taken > 0, every[s]
                )
                if k:
                    first_n = _first_ordinal(cursor[s], info)
                    for at, mid in marks:
                        mark = {"id": mid} | ({"n": first_n + at - 1} if first_n is not None else {})
                        cuts[s].append((counted[s] + at, mark))
                    cursor[s] = {"id": last} | ({"n": first_n + k - 1} if first_n is not None else {})
                    counted[s] += k
                    taken += k
                    records -= k
                    if nbytes > 0:
                        nbytes = max(0, nbytes - used)
                if full or records <= 0:  # the byte or record budget is spent
                    spent = True
                    active = []
                    break
                if more:
                    still.append(s)
            else:
                active = still
        out.update(cursor)
        return _Plan(out, counted, cuts, full=spent)

    def _scan(
        self, s: str, after: str, want: int, max_bytes: float, any_taken: bool, every: int
    ) -> tuple[int, str, int, bool, bool, list[tuple[int, str]], dict[str, Any] | None]:
        """Count up to ``want`` entries after ``after`` inside Redis (a Lua script: nothing is shipped).

        Returns (entries taken, last id, their bytes, whether more may follow, whether the byte
        budget stopped it, ``(position, id)`` every ``every`` entries, the stream's XINFO afterwards).
        """

        def run(client: Any) -> tuple[Any, Any]:
            res = client.eval(
                _SCAN_SCRIPT, 1, s, after, want, int(max_bytes), 1 if any_taken else 0, min(self.page_size, want), every
            )
            return res, _xinfo_or_error(client, s)  # after the scan: a trim in between errs on the safe side

        res, raw = self._call(run, f"counting entries of {s!r}")
        k, last, used, more, full = int(res[0]), _text(res[1]), int(res[2]), bool(res[3]), bool(res[4])
        marks = [(int(res[i]), _text(res[i + 1])) for i in range(5, len(res), 2)]
        return k, last, used, more, full, marks, self._info(raw)

    def _end_now(self, s: str) -> dict[str, Any]:
        info = self._info(self._call(lambda c: _xinfo_or_error(c, s), f"reading stream {s!r}"))
        return {"id": "0-0", "n": 0} if info is None else _at_end(info)

    def _left(self, cursors: dict[str, dict[str, Any]]) -> dict[str, int] | None:
        """How many entries follow each stream's cursor (from ordinals alone; ``None``: unknown)."""
        if not cursors:
            return {}

        def run(client: Any) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for s in cursors:
                pipe.xinfo_stream(s)
            return list(pipe.execute(raise_on_error=False))

        left: dict[str, int] = {}
        for (s, pos), raw in zip(cursors.items(), self._call(run, "reading the streams' state"), strict=True):
            info = self._info(raw)
            if info is None:
                left[s] = 0
                continue
            if "n" not in pos or not _clean_window(info):
                return None
            added = int(info["entries-added"])
            left[s] = added - max(int(pos["n"]), added - int(info.get("length", 0)))
        return left

    def source_lag(self, end_offset: Any) -> int | None:
        """Entries added to the streams after ``end_offset`` (None: unknown, e.g. after a trim)."""
        if not isinstance(end_offset, dict):
            return None
        cursors = {s: pos for s, pos in end_offset.items() if isinstance(pos, dict)}
        left = self._left(cursors)
        return None if left is None else sum(left.values())

    def _remember_splits(
        self,
        start: Offset,
        ends: Offset,
        counted: dict[str, int],
        cuts: dict[str, list[tuple[int, dict[str, Any]]]],
    ) -> None:
        """Split points of each stream's range, for :meth:`partitions` (planner-local, never required)."""
        self._splits = {}
        for s, total in counted.items():
            parts = min(self.read_partitions, total // _MIN_PART_RECORDS)
            marks = cuts.get(s, [])
            if parts < 2 or not marks:
                continue
            first = self._start_for(start, s)
            assert first is not None
            chosen: list[dict[str, Any]] = []
            for j in range(1, parts):  # the mark nearest each even cut, in order, without repeats
                goal = total * j // parts
                pos, mark = min(marks, key=lambda m: abs(m[0] - goal))  # noqa: B023 - used at once
                if 0 < pos < total and (not chosen or _parse_id(mark["id"]) > _parse_id(chosen[-1]["id"])):
                    chosen.append(mark)
            if chosen:
                self._splits[s] = (first["id"], ends[s]["id"], chosen)

    def clamp_offset(self, start: Offset, end: Offset, target: Offset) -> Offset:
        """Per stream the earlier of ``end`` and ``target``, never before ``start`` (ids compare as numbers)."""
        out: Offset = {}
        for s, e in end.items():
            st = self._start_for(start, s, end) or e
            if s not in target:
                out[s] = st
                continue
            t = target[s]
            pick = e if _parse_id(e["id"]) <= _parse_id(t["id"]) else t
            out[s] = st if _parse_id(pick["id"]) < _parse_id(st["id"]) else pick
        return out

    def partitions(self, start: Offset, end: Offset) -> Sequence[tuple[Offset, Offset]]:
        """One sub-range per stream that has new entries.

        When the planner fetched a stream's entries to find the batch's end (a records or bytes
        limit), it also knows ids inside the range: the range is then cut into ``read_partitions``
        sub-ranges read in parallel, each with exact ordinals. A replay planned by a restarted
        driver reads the same entries in one partition per stream.
        """
        parts: list[tuple[Offset, Offset]] = []
        splits = getattr(self, "_splits", {})
        for s in self.streams:
            e = end.get(s)
            st = self._start_for(start, s, end)
            if e is None or st is None or _parse_id(e["id"]) <= _parse_id(st["id"]):
                continue
            hint = splits.get(s)
            if hint is not None and hint[0] == st["id"] and hint[1] == e["id"]:
                bounds = [st, *hint[2], e]  # the planner saw this range's entries: read it in parallel
                parts.extend(({s: a}, {s: b}) for a, b in zip(bounds, bounds[1:], strict=False))
            else:
                parts.append(({s: st}, {s: e}))
        return parts

    # ---- reading ---------------------------------------------------------------------------
    def read(self, start: Offset, end: Offset) -> Iterable[Sequence[Any]]:
        """The entries of each stream in ``(start, end]``, converted to the output columns."""
        for s, e in end.items():
            st = self._start_for(start, s, end)
            if st is not None and _parse_id(e["id"]) > _parse_id(st["id"]):
                yield from self._read_stream(s, st, e)

    def _read_stream(self, s: str, st: dict[str, Any], e: dict[str, Any]) -> Iterator[Any]:
        build = self._page_builder(s)
        cursor, end_id = st["id"], e["id"]
        last: bytes | None = None
        count = 0
        while True:
            lo = cursor
            page: list[Any] = self._call(
                lambda c: c.execute_command("XRANGE", s, "(" + lo, end_id, "COUNT", self.page_size),  # noqa: B023
                f"XRANGE {s} ({cursor} {end_id}",
            )
            if page:
                yield build(page)
            count += len(page)
            if page:
                last = page[-1][0]
                cursor = last.decode()
            if len(page) < self.page_size or cursor == end_id:
                break
        self._check_complete(s, st, e, count, None if last is None else last.decode())

    def _page_builder(self, s: str) -> Callable[[list[Any]], Any]:
        """A function turning one raw ``XRANGE`` page (``[id, [field, value, ...]]`` entries) into a record batch.

        Columns are built whole; a page with a value that does not convert is converted entry by
        entry instead, which marks exactly the malformed entries.
        """
        import pyarrow as pa

        from weir.sources.columnar import Unconvertible, arrow_column, record_batch
        from weir.sources.replayable import to_batch

        names, types = self.arrow_layout()
        cols = [(2 * j, c.name.encode(), c.type, converter(c.type)) for j, c in enumerate(self.entry_columns)]
        convert = self._converter(s)
        with_stream, with_id = self.stream_field is not None, self.id_field is not None

        def build(page: list[Any]) -> Any:
            n = len(page)
            try:
                arrays = []
                for pos, key, type_name, conv in cols:
                    # producers usually write an entry's fields in the same order: try that position first
                    val = pos + 1
                    raw = [fl[val] if len(fl) > val and fl[pos] == key else _lookup(fl, key) for _, fl in page]
                    arrays.append(arrow_column(raw, type_name, conv))
            except Unconvertible:
                rows = [convert(eid, dict(zip(fl[::2], fl[1::2], strict=False))) for eid, fl in page]
                return to_batch(rows, names, types, self.describe())
            if with_stream:
                arrays.append(pa.array([s] * n, pa.string()))
            if with_id:
                arrays.append(pa.array([eid for eid, _ in page], pa.binary()).cast(pa.string()))
            return record_batch(arrays, names, n)

        return build

    def _converter(self, s: str) -> Callable[[bytes, dict[bytes, bytes]], tuple[Any, ...]]:
        cols = [(c.name, c.name.encode(), converter(c.type)) for c in self.entry_columns]
        with_stream, with_id = self.stream_field is not None, self.id_field is not None
        width = len(self._columns)

        def convert(eid: bytes, fields: dict[bytes, bytes]) -> tuple[Any, ...]:
            try:
                out = [conv(fields.get(key)) for _, key, conv in cols]
            except (ValueError, UnicodeDecodeError):
                return (*([None] * width), _why(cols, fields, f"stream {s!r} entry {eid.decode()}"))
            if with_stream:
                out.append(s)
            if with_id:
                out.append(eid.decode())
            out.append(None)
            return tuple(out)

        return convert

    def _check_complete(self, s: str, st: dict[str, Any], e: dict[str, Any], count: int, last_id: str | None) -> None:
        """Compare what the range held with what was planned; a gap is a trimmed (or deleted) range."""
        rng = f"({st['id']}, {e['id']}]"
        info: dict[str, Any] | None = None
        if "n" in st and "n" in e:
            planned = int(e["n"]) - int(st["n"])
            if count == planned:
                return
            if count > planned:
                problem = (
                    f"holds {count} entries in {rng} but {planned} were planned (was the stream deleted "
                    "and created again?)"
                )
            else:
                problem = f"lost {planned - count} of the {planned} entries in {rng}"
            info = self._info(self._call(lambda c: _xinfo_or_error(c, s), f"XINFO STREAM {s}"))
        else:
            info = self._info(self._call(lambda c: _xinfo_or_error(c, s), f"XINFO STREAM {s}"))
            deleted = info.get("max-deleted-entry-id") if info else None
            in_range = deleted is not None and _parse_id(st["id"]) < _parse_id(deleted) <= _parse_id(e["id"])
            if last_id == e["id"] and not in_range:
                return
            problem = f"lost entries in {rng}"
        first = info.get("first-entry") if info else None
        head = f"the stream now starts at {first[0].decode()}" if first else "the stream is now empty or gone"
        what = (
            f"Redis stream {s!r} ({self.settings.describe()}) {problem}: trimmed (MAXLEN/MINID) or deleted "
            f"(XDEL) before this batch read them; {head}"
        )
        if self.guarantee is Guarantee.TRANSACTIONAL:
            msg = (
                f"{what}. A TRANSACTIONAL spout cannot replay this batch: keep the stream longer, or declare "
                "guarantee=Guarantee.OPAQUE to continue with the entries that are left"
            )
            raise SourceError(msg)
        log.warning("%s; continuing with the entries that are left (guarantee %s)", what, self.guarantee.value)


# ---- helpers ---------------------------------------------------------------------------------
#: Count entries after an id inside Redis, within a record and a byte budget (at least one entry
#: unless others were taken already); report every EVERY-th id as a possible split point.
#: KEYS[1] stream; ARGV: after-id, want, max bytes (-1: none), others taken (0/1), page, every.
#: Returns {taken, last id, bytes, more may follow (0/1), stopped by bytes (0/1), pos, id, pos, id, ...}.
_SCAN_SCRIPT = """
local key, cursor = KEYS[1], ARGV[1]
local want, maxb, any = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local page, every = tonumber(ARGV[5]), tonumber(ARGV[6])
local taken, bytes, last, marks = 0, 0, '', {}
while taken < want do
  local n = math.min(page, want - taken)
  local es = redis.call('XRANGE', key, '(' .. cursor, '+', 'COUNT', n)
  for _, e in ipairs(es) do
    local size = #e[1]
    local f = e[2]
    for j = 1, #f do size = size + #f[j] end
    if maxb >= 0 and (taken > 0 or any == 1) and bytes + size > maxb then
      return {taken, last, bytes, 1, 1, unpack(marks)}
    end
    taken = taken + 1
    bytes = bytes + size
    last = e[1]
    if taken % every == 0 then
      marks[#marks + 1] = taken
      marks[#marks + 1] = last
    end
  end
  if #es < n then return {taken, last, bytes, 0, 0, unpack(marks)} end
  cursor = last
end
return {taken, last, bytes, 1, 0, unpack(marks)}
"""


def _raw_reply(response: Any, **_options: Any) -> Any:
    """The reply as the parser returned it (no per-entry dicts)."""
    return response


@dataclass
class _Plan:
    """A counted batch: its end, entries per stream, split marks, and whether the budget was spent."""

    end: Offset
    counted: dict[str, int]
    cuts: dict[str, list[tuple[int, dict[str, Any]]]]
    full: bool


def _plan_key(start: Offset, limit: ReadLimit) -> str:
    return json.dumps([start, limit.max_records, limit.max_bytes], sort_keys=True)


def _lookup(flat: list[bytes], key: bytes) -> bytes | None:
    """The value of ``key`` in an entry's flat ``[field, value, ...]`` list (``None`` when missing)."""
    for i in range(0, len(flat) - 1, 2):
        if flat[i] == key:
            return flat[i + 1]
    return None


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _why(cols: list[tuple[str, bytes, Callable[[Any], Any]]], fields: dict[bytes, bytes], where: str) -> str:
    """The first field of a malformed entry that does not convert, and why."""
    for name, key, conv in cols:
        try:
            conv(fields.get(key))
        except (ValueError, UnicodeDecodeError) as exc:
            return f"{where}: field {name!r}: {exc}"
    return f"{where}: malformed"


def _xinfo_or_error(client: Any, s: str) -> Any:
    try:
        return client.xinfo_stream(s)
    except _response_error() as exc:
        return exc


def _clean_window(info: dict[str, Any]) -> bool:
    """Whether every entry still in the stream has its ordinal ``entries-added - length + position``."""
    if "entries-added" not in info:
        return False
    first = info.get("first-entry")
    if not first or int(info.get("length", 0)) == 0:
        return True
    deleted = info.get("max-deleted-entry-id")
    return deleted is not None and _parse_id(deleted) < _parse_id(first[0])


def _before_head(info: dict[str, Any]) -> dict[str, Any]:
    """``start="0"``: before everything; entries already trimmed away are not counted as lost."""
    pos: dict[str, Any] = {"id": "0-0"}
    if _clean_window(info):
        pos["n"] = int(info["entries-added"]) - int(info.get("length", 0))
    return pos


def _at_end(info: dict[str, Any]) -> dict[str, Any]:
    """``start="$"``: after the last id generated so far (ordinal = entries added so far)."""
    last = info.get("last-generated-id") or b"0-0"
    pos: dict[str, Any] = {"id": _fmt(_parse_id(last))}
    if "entries-added" in info:
        pos["n"] = int(info["entries-added"])
    return pos


def _first_ordinal(pos: dict[str, Any], info: dict[str, Any] | None) -> int | None:
    """Ordinal of the first entry after ``pos``, when the stream's state tells it exactly."""
    if info is None or "entries-added" not in info:
        return None
    first = info.get("first-entry")
    if not first:
        return None
    if _parse_id(pos["id"]) < _parse_id(first[0]):  # the head moved past pos: the first entry is the head
        return int(info["entries-added"]) - int(info["length"]) + 1 if _clean_window(info) else None
    deleted = info.get("max-deleted-entry-id")
    if "n" in pos and deleted is not None and _parse_id(deleted) <= _parse_id(pos["id"]):
        return int(pos["n"]) + 1
    return None
