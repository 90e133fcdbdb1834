"""``KafkaSpout``: Kafka topics read by offset range per partition (confluent-kafka, assign + seek).

Offsets
-------
``{"orders": {"0": 1200, "1": 1187}, "$ids": {"orders": "<topic id>"}}``: per topic and partition, the
next offset to read, and each topic's id. A batch is the range ``[start, end)`` of every partition;
Spark stores both ends in its offset log before the batch runs and replays exactly that range after a
failure. The end of a batch is the partition's last stable offset (with
``isolation_level="read_committed"``, the default) or its high watermark, so a range never holds a
record whose transaction is still open.

Resets and errors
-----------------
A topic deleted and created again under the same name (a new topic id, a partition that ends below
the committed offset or is gone) or a named topic deleted fails the batch with a
:class:`~weir.errors.SourceError` naming the topic, the partition and both offsets: its offsets now
mean other records, and weir never skips or re-reads them silently. Broker answers that mean "ask
again" (a leader moving: ``FENCED_LEADER_EPOCH``, ``NOT_LEADER_OR_FOLLOWER``,
``LEADER_NOT_AVAILABLE``; a broker restarting; timeouts) are retried for ``connect_timeout_s``, then
raised as :class:`~weir.errors.TransientSourceError`, which supervision retries with back-off (also
while the initial offsets are computed at start); anything else stops the run.

Why not Spark's own Kafka source
--------------------------------
Spark's ``spark-sql-kafka-0-10`` connector must match the Spark version; for PySpark 4.3.0 Maven
Central has no such artifact (its newest is 4.2.0), so weir reads Kafka itself, as a
:class:`~weir.sources.ReplayableSpout`.

Guarantee
---------
``TRANSACTIONAL`` while every offset of a range still exists: a range whose start was deleted by
retention (``retention.ms``/``retention.bytes``, ``DeleteRecords``) fails its batch with a
:class:`~weir.errors.SourceError` naming the topic, the partition and the offsets; ``OPAQUE`` logs a
warning and continues with the records that are left. Compaction removes records *inside* a range
without moving its start, which cannot be told from transaction markers, so a ``TRANSACTIONAL``
spout refuses a compacted topic at submit: declare ``OPAQUE`` for those.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from weir._util import positive_int
from weir.connectors.kafka.client import (
    check_settings,
    client_module,
    describe_servers,
    error_callback,
    explain,
    is_retriable,
    topic_partitions,
)
from weir.errors import ConfigError, SourceError, TransientSourceError
from weir.sources.replayable import Offset, ReadLimit, ReplayableSpout
from weir.sources.schema import Column, converter, parse_columns
from weir.topology.components import Guarantee

__all__ = ["KafkaSpout"]

log = logging.getLogger("weir.sources")

_FORMATS = ("bytes", "utf-8", "json")
#: records asked of the client per consume() call
_CONSUME_BATCH = 50_000
_second = itemgetter(1)  # a message's timestamp() is (type, epoch ms)
_META = ("topic", "partition", "offset", "timestamp", "headers")
#: the offset's entry holding each topic's id (not a topic: Kafka names never contain ``$``)
IDS = "$ids"
#: one consumer per settings and process (executors reuse their Python workers), with the pid that
#: made it: a forked child (a Python worker forked from Spark's daemon) never uses its parent's
#: client, whose librdkafka threads did not survive the fork
_CONSUMERS: dict[tuple[tuple[str, str], ...], tuple[int, Any]] = {}


class KafkaSpout(ReplayableSpout):
    """Records of Kafka topics, each read exactly once per committed batch.

    Parameters
    ----------
    bootstrap_servers : ``"host:port[,host:port...]"``
    topics : topic name(s) to read; or give ``pattern`` instead
    pattern : a regular expression; every matching topic (also ones created later) is read
    config : further client settings passed through to librdkafka (``security.protocol``,
        ``sasl.mechanism``, ``sasl.username``, ``ssl.ca.location``, ...)
    start : where a new topology starts: ``"earliest"`` (default), ``"latest"``, or per partition
        ``{"topic": {"0": 42, "1": -2}}`` (an offset; ``-2`` earliest, ``-1`` latest; partitions not
        named start at the earliest)
    start_timestamp_ms : start at the first record at or after this time (epoch milliseconds)
    key_format : ``"utf-8"`` (default, a ``STRING`` column) or ``"bytes"`` (``BINARY``)
    value_format : ``"utf-8"`` (default), ``"bytes"`` or ``"json"`` (the value's JSON text, checked)
    value_schema : DDL of the fields of a JSON object value, e.g. ``"user STRING, amount BIGINT"``:
        these columns replace ``value``
    max_records_per_batch : back-pressure: records per batch, shared fairly among partitions
    guarantee : ``TRANSACTIONAL`` (default) or ``OPAQUE`` (see the module docs)
    isolation_level : ``"read_committed"`` (default: records of aborted transactions are skipped)
        or ``"read_uncommitted"``
    connect_timeout_s : how long a metadata or offset request may take before the batch fails

    Output columns: ``key``, ``value`` (or the ``value_schema`` fields), ``topic``, ``partition``
    (``INT``), ``offset`` (``BIGINT``), ``timestamp`` (``BIGINT``, epoch ms) and ``headers`` (a JSON
    list of ``[name, value]`` pairs, values decoded as UTF-8 with invalid bytes escaped, or ``null``).
    A record whose value does not decode is malformed: it fails its batch naming topic, partition
    and offset, or goes to the topology's dead-letter sink.

    Examples
    --------
    >>> spout = KafkaSpout("127.0.0.1:9092", "orders", value_schema="user STRING, amount BIGINT",
    ...                    max_records_per_batch=50_000)
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topics: str | Sequence[str] | None = None,
        *,
        pattern: str | None = None,
        config: Mapping[str, Any] | None = None,
        start: str | Mapping[str, Mapping[str, int]] = "earliest",
        start_timestamp_ms: int | None = None,
        key_format: str = "utf-8",
        value_format: str = "utf-8",
        value_schema: str | None = None,
        max_records_per_batch: int | None = None,
        guarantee: Guarantee = Guarantee.TRANSACTIONAL,
        isolation_level: str = "read_committed",
        connect_timeout_s: float = 15.0,
    ) -> None:
        where = "KafkaSpout"
        self.settings = check_settings(bootstrap_servers, config, where)
        if (topics is None) == (pattern is None):
            msg = f"{where}: give either topics=[...] or pattern='regex'"
            raise ConfigError(msg)
        if topics is not None:
            names = [topics] if isinstance(topics, str) else list(topics)
            if not names or not all(isinstance(t, str) and t for t in names) or len(set(names)) != len(names):
                msg = f"{where}: topics must be one or more distinct non-empty names, got {topics!r}"
                raise ConfigError(msg)
            self.topics: list[str] | None = names
            self.pattern: str | None = None
        else:
            try:
                re.compile(str(pattern))
            except re.error as exc:
                msg = f"{where}: pattern {pattern!r} is not a regular expression: {exc}"
                raise ConfigError(msg) from exc
            self.topics, self.pattern = None, str(pattern)
        self.start = self._check_start(start, start_timestamp_ms)
        self.start_timestamp_ms = start_timestamp_ms
        if key_format not in ("utf-8", "bytes"):
            msg = f"{self.describe()}: key_format must be 'utf-8' or 'bytes', got {key_format!r}"
            raise ConfigError(msg)
        if value_format not in _FORMATS:
            msg = f"{self.describe()}: value_format must be one of {_FORMATS}, got {value_format!r}"
            raise ConfigError(msg)
        if value_schema is not None and value_format not in ("json", "utf-8"):
            msg = f"{self.describe()}: value_schema reads JSON objects; it cannot be used with value_format='bytes'"
            raise ConfigError(msg)
        self.key_format, self.value_format = key_format, "json" if value_schema else value_format
        self.value_columns = parse_columns(value_schema, None, where=self.describe()) if value_schema else None
        if isolation_level not in ("read_committed", "read_uncommitted"):
            msg = f"{self.describe()}: isolation_level must be 'read_committed' or 'read_uncommitted'"
            raise ConfigError(msg)
        self.isolation_level = isolation_level
        if not isinstance(guarantee, Guarantee) or guarantee is Guarantee.NON_TRANSACTIONAL:
            msg = f"{self.describe()}: guarantee must be Guarantee.TRANSACTIONAL or Guarantee.OPAQUE, got {guarantee!r}"
            raise ConfigError(msg)
        self.guarantee = guarantee
        self.connect_timeout_s = float(connect_timeout_s)
        self.max_records_per_batch = max_records_per_batch
        key_type = "STRING" if key_format == "utf-8" else "BINARY"
        val = self.value_columns or [Column("value", "BINARY" if value_format == "bytes" else "STRING")]
        meta = "topic STRING, partition INT, offset BIGINT, timestamp BIGINT, headers STRING"
        ddl = ", ".join([f"key {key_type}", *(f"{c.name} {c.type}" for c in val), meta])
        self._columns = parse_columns(ddl, None, where=self.describe())
        self.fields = [c.name for c in self._columns]
        self.corrupt_column = True
        self.read_limit()

    def _check_start(self, start: Any, ts: Any) -> Any:
        if ts is not None:
            positive_int(ts, f"{self.describe()}: start_timestamp_ms", minimum=0, expected="epoch milliseconds ≥ 0")
            return "timestamp"
        if start in ("earliest", "latest"):
            return start
        if isinstance(start, Mapping):
            out: dict[str, dict[str, int]] = {}
            for t, parts in start.items():
                if not isinstance(parts, Mapping):
                    break
                out[str(t)] = {}
                for p, o in parts.items():
                    if isinstance(o, bool) or not isinstance(o, int) or o < -2 or not str(p).isdigit():
                        break
                    out[str(t)][str(int(p))] = o
                else:
                    continue
                break
            else:
                return out
        msg = (
            f"{self.describe()}: start must be 'earliest', 'latest' or {{'topic': {{'0': offset}}}} "
            f"(-2 earliest, -1 latest), got {start!r}"
        )
        raise ConfigError(msg)

    def describe(self) -> str:
        """``KafkaSpout(host:port, topics=[...])`` (no credentials)."""
        topics = getattr(self, "topics", None)
        what = f"topics={topics}" if topics else f"pattern={getattr(self, 'pattern', None)!r}"
        servers = describe_servers(self.settings) if hasattr(self, "settings") else "?"
        return f"KafkaSpout({servers}, {what})"

    def columns(self) -> list[Column]:
        """``key``, the value column(s), then the record's metadata columns."""
        return list(self._columns)

    # ---- metadata ----------------------------------------------------------------------------
    def _partitions_now(self) -> dict[str, int]:
        """The topics read now (named, or matching the pattern) and their partition counts."""
        found = topic_partitions(self.settings, self.connect_timeout_s, self.describe())
        if self.topics is not None:
            return {t: found[t] for t in self.topics if t in found}
        rx = re.compile(str(self.pattern))
        return {t: n for t, n in sorted(found.items()) if rx.fullmatch(t)}

    def _list_offsets(self, tps: list[tuple[str, int]], spec: str | int) -> dict[tuple[str, int], int]:
        """``earliest``, ``latest`` (the last stable offset when reading committed) or the offset by timestamp."""
        if not tps:
            return {}
        ck = client_module()
        offset_spec = ck.admin.OffsetSpec
        from weir.connectors.kafka.client import admin

        if spec == "earliest":
            os_ = offset_spec.earliest()
        elif spec == "latest":
            os_ = offset_spec.latest()
        else:
            os_ = offset_spec.for_timestamp(int(spec))
        level = (
            ck.IsolationLevel.READ_COMMITTED
            if self.isolation_level == "read_committed"
            else ck.IsolationLevel.READ_UNCOMMITTED
        )
        req = {ck.TopicPartition(t, p): os_ for t, p in tps}

        def ask() -> dict[tuple[str, int], int]:
            futures = admin(self.settings).list_offsets(
                req, isolation_level=level, request_timeout=self.connect_timeout_s
            )
            return {(tp.topic, tp.partition): int(f.result(self.connect_timeout_s).offset) for tp, f in futures.items()}

        out: dict[tuple[str, int], int] = self._retrying(ask, f"listing the {spec} offsets of {len(tps)} partitions")
        if spec not in ("earliest", "latest"):  # no record at/after the time: start at the end
            ends = self._list_offsets([k for k, v in out.items() if v < 0], "latest")
            out.update(ends)
        return out

    def _retrying(self, ask: Any, what: str) -> Any:
        """``ask()``, retried with back-off while the brokers answer with a retriable error.

        A leader moving or being elected (``FENCED_LEADER_EPOCH``, ``NOT_LEADER_OR_FOLLOWER``,
        ``LEADER_NOT_AVAILABLE``, ...), a broker restarting, a timeout: asked again for up to
        ``connect_timeout_s``, then a :class:`TransientSourceError` (supervision restarts the query with
        back-off). Any other error is a :class:`SourceError` at once (the run stops).
        """
        deadline = time.monotonic() + self.connect_timeout_s
        delay = 0.1
        while True:
            try:
                return ask()
            except Exception as exc:
                why = explain(self.settings, exc) or repr(exc)
                if not is_retriable(exc):
                    msg = f"{self.describe()}: {what} failed: {why}"
                    raise SourceError(msg) from exc
                if time.monotonic() + delay > deadline:
                    msg = (
                        f"{self.describe()}: {what} failed with a retriable error for {self.connect_timeout_s:.0f}s "
                        f"(connect_timeout_s): {why}; the query is restarted with back-off (weir.restart.max)"
                    )
                    raise TransientSourceError(msg) from exc
                log.info("%s: %s: %s; asking again in %.1fs", self.describe(), what, why, delay)
                time.sleep(delay)
                delay = min(2 * delay, 2.0)

    def _topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Each topic's id: a topic deleted and created again under the same name gets a new one."""
        names = sorted(set(topics))
        if not names:
            return {}
        ck = client_module()
        from weir.connectors.kafka.client import admin

        def ask() -> dict[str, str]:
            futures = admin(self.settings).describe_topics(
                ck.TopicCollection(names), request_timeout=self.connect_timeout_s
            )
            return {t: str(f.result(self.connect_timeout_s).topic_id) for t, f in futures.items()}

        out: dict[str, str] = self._retrying(ask, f"describing topic(s) {names}")
        return out

    def _check_not_reset(
        self, start: Offset, found: Mapping[str, int], ends: Mapping[tuple[str, int], int], ids: Mapping[str, str]
    ) -> None:
        """Refuse positions the topics no longer have: a topic deleted, or deleted and created again.

        A committed position is only meaningful on the topic it was read from: a new topic id, or a
        partition ending below the committed offset (a recreated or truncated topic), means the
        records after it are not the ones this topology counted on. Never skipped silently.
        """
        old_ids = start.get(IDS, {})
        for t, parts in _positions(start).items():
            if t not in found:
                if self.topics is None:  # a pattern: a topic may go away; its committed position stays
                    continue
                msg = (
                    f"{self.describe()}: topic {t!r} was deleted under the committed offsets {dict(parts)}; "
                    f"{_RESET_REMEDY}"
                )
                raise SourceError(msg)
            was, now = old_ids.get(t), ids.get(t)
            if was is not None and now is not None and was != now:
                msg = (
                    f"{self.describe()}: topic {t!r} was deleted and created again: its id is now {now}, the "
                    f"committed offsets {dict(parts)} belong to topic id {was}; {_RESET_REMEDY}"
                )
                raise SourceError(msg)
            for p, o in parts.items():
                if int(p) >= found[t]:
                    msg = (
                        f"{self.describe()}: topic {t!r} has {found[t]} partition(s) now; partition {p} with the "
                        f"committed offset {o} is gone (the topic was deleted and created again); {_RESET_REMEDY}"
                    )
                    raise SourceError(msg)
                e = ends.get((t, int(p)))
                if e is not None and e < int(o):
                    msg = (
                        f"{self.describe()}: topic {t!r} partition {p}: the committed offset is {o} but the "
                        f"partition now ends at {e}: the topic was deleted and created again, or truncated; "
                        f"{_RESET_REMEDY}"
                    )
                    raise SourceError(msg)

    def check_reachable(self) -> None:
        """Submit-time checks: brokers reachable, every named topic exists, no compacted topic for TRANSACTIONAL.

        Raises
        ------
        SourceError
            Unreachable brokers or a missing topic.
        ConfigError
            A ``TRANSACTIONAL`` spout on a compacted topic.
        """
        found = topic_partitions(self.settings, self.connect_timeout_s, self.describe())
        if self.topics is not None:
            missing = [t for t in self.topics if t not in found]
            if missing:
                msg = (
                    f"{self.describe()}: topic(s) {missing} do not exist on {describe_servers(self.settings)}; "
                    "create them first (weir does not create the topics it reads)"
                )
                raise SourceError(msg)
        if self.guarantee is Guarantee.TRANSACTIONAL:
            for t in self._partitions_now():
                if "compact" in self._topic_config(t).get("cleanup.policy", ""):
                    msg = (
                        f"{self.describe()}: topic {t!r} is compacted (cleanup.policy=compact): compaction removes "
                        "records inside a range, so a replay may differ; declare guarantee=Guarantee.OPAQUE"
                    )
                    raise ConfigError(msg)

    def _topic_config(self, topic: str) -> dict[str, str]:
        from weir.connectors.kafka.client import admin

        res = client_module().admin.ConfigResource("topic", topic)
        try:
            fut = admin(self.settings).describe_configs([res], request_timeout=self.connect_timeout_s)[res]
            return {k: str(v.value) for k, v in fut.result(self.connect_timeout_s).items()}
        except Exception as exc:
            msg = f"{self.describe()}: describing topic {topic!r} failed: {explain(self.settings, exc)}"
            raise SourceError(msg) from exc

    def validate(self) -> None:
        """Submit-time checks: see :meth:`check_reachable`."""
        self.check_reachable()

    # ---- offsets -----------------------------------------------------------------------------
    def initial_offset(self) -> Offset:
        """Per partition: the earliest / latest offset, the given one, or the first at ``start_timestamp_ms``."""
        tps = [(t, p) for t, n in self._partitions_now().items() for p in range(n)]
        if self.start == "timestamp":
            pos = self._list_offsets(tps, int(self.start_timestamp_ms or 0))
        elif isinstance(self.start, dict):
            pos = self._list_offsets(tps, "earliest")
            named = [(t, p) for t, p in tps if str(p) in self.start.get(t, {})]
            latest = self._list_offsets([tp for tp in named if self.start[tp[0]][str(tp[1])] == -1], "latest")
            for t, p in named:
                o = self.start[t][str(p)]
                pos[(t, p)] = latest[(t, p)] if o == -1 else pos[(t, p)] if o == -2 else o
        else:
            pos = self._list_offsets(tps, str(self.start))
        out: Offset = {}
        for (t, p), o in sorted(pos.items()):
            out.setdefault(t, {})[str(p)] = o
        if out:
            out[IDS] = self._topic_ids(out)
        return out

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """Per partition the last stable offset, or — with a limit — a fair share of the records."""
        found = self._partitions_now()
        tps = [(t, p) for t, n in found.items() for p in range(n)]
        positions = _positions(start)
        new = [(t, p) for t, p in tps if str(p) not in positions.get(t, {})]
        begin = {(t, int(p)): int(o) for t, parts in positions.items() for p, o in parts.items()}
        ids = self._topic_ids(found)
        ends = self._list_offsets(tps, "latest")
        self._check_not_reset(start, found, ends, ids)
        if new:  # partitions (or topics) added since the start: read them from their beginning
            log.info("%s: new partitions %s start at their earliest offsets", self.describe(), new)
            begin.update(self._list_offsets(new, "earliest"))
        avail = {tp: max(0, ends[tp] - begin[tp]) for tp in tps}
        take = _fair_share(avail, limit.max_records)
        out: Offset = {}
        for (t, p), o in sorted(begin.items()):
            out.setdefault(t, {})[str(p)] = o + take.get((t, p), 0)
        known = {t: i for t, i in {**start.get(IDS, {}), **ids}.items() if t in out}
        if known:
            out[IDS] = known
        return out

    def partitions(self, start: Offset, end: Offset) -> Sequence[tuple[Offset, Offset]]:
        """One sub-range per topic partition with new records."""
        parts: list[tuple[Offset, Offset]] = []
        for t, ends in sorted(_positions(end).items()):
            for p, e in sorted(ends.items(), key=lambda kv: int(kv[0])):
                s = start.get(t, {}).get(p)
                if s is None:  # a partition new since start: its range begins at its earliest offset
                    parts.append(({t: {}}, {t: {p: e}}))
                elif e > s:
                    parts.append(({t: {p: s}}, {t: {p: e}}))
        return parts

    def lag(self, position: Offset) -> dict[tuple[str, int], int]:
        """Records not yet read per ``(topic, partition)``: the last stable offset minus ``position``.

        ``position`` is an offset of this spout (Spark's ``endOffset`` of the last batch, as in a
        query's progress). Partitions the position does not name count from their earliest offset.
        """
        tps = [(t, p) for t, n in self._partitions_now().items() for p in range(n)]
        ends = self._list_offsets(tps, "latest")
        begin = {(t, int(p)): int(o) for t, parts in _positions(position).items() for p, o in parts.items()}
        missing = [tp for tp in tps if tp not in begin]
        begin.update(self._list_offsets(missing, "earliest"))
        return {tp: max(0, ends[tp] - begin[tp]) for tp in tps}

    # ---- reading -----------------------------------------------------------------------------
    def _consumer(self) -> Any:
        settings = dict(self.settings)
        settings.update(
            {
                "group.id": "weir-kafka-spout",  # never joins or commits: partitions are assigned by hand
                "enable.auto.commit": "false",
                "enable.auto.offset.store": "false",
                "auto.offset.reset": "error",
                "isolation.level": self.isolation_level,
                "enable.partition.eof": "false",
                "fetch.wait.max.ms": "50",
            }
        )
        settings.setdefault("queued.max.messages.kbytes", "65536")
        # a fetch returns whole record batches up to this size whatever the range's end, and every
        # record in it is decompressed and parsed; larger fetches threw away more (8 MiB: ~20% more CPU)
        settings.setdefault("max.partition.fetch.bytes", "1048576")
        key = tuple(sorted(settings.items()))
        pid = os.getpid()
        mine = _CONSUMERS.get(key)
        if mine is None or mine[0] != pid:
            mine = (pid, client_module().Consumer({**settings, "error_cb": error_callback(self.settings)}))
            _CONSUMERS[key] = mine
        return mine[1]

    def read(self, start: Offset, end: Offset) -> Iterable[Any]:
        """The records of every partition in ``[start, end)`` as Arrow record batches."""
        for t, ends in sorted(_positions(end).items()):
            for p, e in sorted(ends.items(), key=lambda kv: int(kv[0])):
                s = start.get(t, {}).get(p)
                if s is None:  # new since start: from its earliest offset (nothing was promised before)
                    yield from self._read_partition(t, int(p), 0, int(e), fresh=True)
                elif e > s:
                    yield from self._read_partition(t, int(p), int(s), int(e))

    def _read_partition(self, topic: str, part: int, s: int, e: int, *, fresh: bool = False) -> Iterator[Any]:
        ck = client_module()
        message = ck.Message
        consumer = self._consumer()
        tp = ck.TopicPartition(topic, part)
        rng = f"[{s}, {e})"
        deadline = time.monotonic() + self.connect_timeout_s
        while True:  # a leader moving (a broker restart) answers NOT_LEADER for a moment
            try:
                low, _high = consumer.get_watermark_offsets(tp, timeout=self.connect_timeout_s, cached=False)
                break
            except Exception as exc:
                if time.monotonic() > deadline:
                    why = explain(self.settings, exc)
                    msg = f"{self.describe()}: topic {topic!r} partition {part}: reading the watermarks failed: {why}"
                    raise SourceError(msg) from exc
                time.sleep(0.5)
        if fresh and low > s:
            s = low
        if low > s:
            what = (
                f"topic {topic!r} partition {part}: offsets {s}..{min(low, e) - 1} of the batch's range {rng} "
                f"were deleted (retention) before this batch read them; the partition now starts at {low}"
            )
            if self.guarantee is Guarantee.TRANSACTIONAL:
                msg = (
                    f"{self.describe()}: {what}. A TRANSACTIONAL spout cannot replay this batch: keep the topic "
                    "longer, or declare guarantee=Guarantee.OPAQUE to continue with the records that are left"
                )
                raise SourceError(msg)
            log.warning("%s: %s; continuing with the records that are left", self.describe(), what)
            s = low
            if s >= e:
                return
        consumer.assign([ck.TopicPartition(topic, part, s)])
        try:
            deadline_gap = max(30.0, 4 * self.connect_timeout_s)
            last_progress = time.monotonic()
            pos = s
            while pos < e:
                msgs = consumer.consume(min(_CONSUME_BATCH, max(1, e - pos)), 0.5)
                errs = list(map(message.error, msgs))
                if errs.count(None) != len(errs):
                    kept = []
                    for m, err in zip(msgs, errs, strict=True):
                        if err is None:
                            kept.append(m)
                        elif err.code() != ck.KafkaError._PARTITION_EOF:
                            why = explain(self.settings, err)
                            msg = f"{self.describe()}: topic {topic!r} partition {part} range {rng}: {why}"
                            raise SourceError(msg)
                    msgs = kept
                # column by column, through the client's own accessors (map: no Python frame per record)
                offs = list(map(message.offset, msgs))
                if offs and offs[-1] >= e:  # a fetch may return records past the range's end
                    cut = bisect.bisect_left(offs, e)
                    msgs, offs = msgs[:cut], offs[:cut]
                    pos = e
                elif offs:
                    pos = offs[-1] + 1
                keys = list(map(message.key, msgs))
                vals = list(map(message.value, msgs))
                tss = list(map(_second, map(message.timestamp, msgs)))
                hdrs = list(map(message.headers, msgs))
                if offs:
                    last_progress = time.monotonic()
                    yield self._batch(topic, part, keys, vals, offs, tss, hdrs)
                elif pos < e:
                    # aborted records and transaction markers occupy offsets that never arrive
                    got = consumer.position([ck.TopicPartition(topic, part)])[0].offset
                    if got >= e:
                        break
                    if got > pos:
                        pos, last_progress = got, time.monotonic()
                    if time.monotonic() - last_progress > deadline_gap:
                        msg = (
                            f"{self.describe()}: topic {topic!r} partition {part}: no progress reading {rng} "
                            f"for {deadline_gap:.0f}s (stuck at offset {pos}); is a broker down?"
                        )
                        raise SourceError(msg)
        finally:
            consumer.unassign()

    def _batch(
        self,
        topic: str,
        part: int,
        keys: list[Any],
        vals: list[Any],
        offs: list[int],
        ts: list[Any],
        hdrs: list[Any],
    ) -> pa.RecordBatch:
        """One record batch of a partition's messages; undecodable values mark their rows malformed."""
        names, types = self.arrow_layout()
        n = len(offs)
        bad: list[str | None] = [None] * n

        def where(i: int) -> str:
            return f"topic {topic!r} partition {part} offset {offs[i]}"

        key_arr = _text_column(keys, self.key_format, bad, where, "key")
        cols: list[pa.Array] = [key_arr]
        if self.value_columns is not None:
            objs: list[Any] = [None] * n
            for i, v in enumerate(vals):
                if bad[i] is not None or v is None:
                    continue
                try:
                    o = json.loads(v)
                except ValueError as exc:
                    bad[i] = f"{where(i)}: value is not JSON: {exc}"
                    continue
                if not isinstance(o, dict):
                    bad[i] = f"{where(i)}: value is a JSON {type(o).__name__}, not an object"
                    continue
                objs[i] = o
            for c in self.value_columns:
                conv = converter(c.type)
                out: list[Any] = [None] * n
                for i, o in enumerate(objs):
                    if o is None or bad[i] is not None:
                        continue
                    try:
                        out[i] = conv(o.get(c.name))
                    except (ValueError, UnicodeDecodeError) as exc:
                        bad[i] = f"{where(i)}: field {c.name!r} ({c.type}): {exc}"
                cols.append(pa.array(out, types[len(cols)]))
        elif self.value_format == "json":
            for i, v in enumerate(vals):
                if v is None or bad[i] is not None:
                    continue
                try:
                    json.loads(v)
                except ValueError as exc:
                    bad[i] = f"{where(i)}: value is not JSON: {exc}"
            cols.append(_text_column(vals, "utf-8", bad, where, "value"))
        else:
            cols.append(_text_column(vals, self.value_format, bad, where, "value"))
        clean = bad.count(None) == n
        if not clean:  # a malformed row carries no data, only the reason
            mask = pa.array([b is not None for b in bad])
            cols = [pc.if_else(mask, pa.nulls(n, c.type), c) for c in cols]
        stamps = pa.array(ts, pa.int64())
        if n and min(ts) < 0:  # -1: the record has no timestamp
            stamps = pc.if_else(pc.less(stamps, 0), pa.scalar(None, pa.int64()), stamps)
        cols += [
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(part, pa.int32()), n),
            pa.array(offs, pa.int64()),
            stamps,
            pa.array([None if h is None else _headers_json(h) for h in hdrs], pa.string())
            if any(hdrs)
            else pa.nulls(n, pa.string()),
            pa.nulls(n, pa.string()) if clean else pa.array(bad, pa.string()),
        ]
        return pa.RecordBatch.from_arrays(cols, names=names)


_RESET_REMEDY = (
    "the records after them are gone and the topic's offsets now mean other records, so weir neither skips "
    "nor re-reads them silently. To read the topic as it is now, run the topology on a new Spark checkpoint "
    "(weir.spark.checkpoint.location) or under a new spout id, with start='earliest' (or the offsets to begin "
    "at); to go on where it was, restore the topic's records"
)


def _positions(offset: Offset) -> dict[str, Any]:
    """The offset's per-topic partition positions (without the topic ids)."""
    return {t: parts for t, parts in offset.items() if t != IDS}


def _text_column(values: list[Any], fmt: str, bad: list[str | None], where: Any, what: str) -> pa.Array:
    if fmt == "bytes":
        return pa.array(values, pa.binary())
    try:
        return pa.array(values, pa.binary()).cast(pa.string())
    except (pa.ArrowInvalid, UnicodeDecodeError):
        out: list[str | None] = []
        for i, v in enumerate(values):
            try:
                out.append(None if v is None else v.decode("utf-8"))
            except UnicodeDecodeError as exc:
                out.append(None)
                if bad[i] is None:
                    bad[i] = f"{where(i)}: {what} is not UTF-8: {exc}"
        return pa.array(out, pa.string())


def _headers_json(headers: list[tuple[str, bytes | None]]) -> str:
    return json.dumps(
        [[k, None if v is None else v.decode("utf-8", "backslashreplace")] for k, v in headers],
        separators=(",", ":"),
    )


def _fair_share(avail: dict[tuple[str, int], int], budget: int | None) -> dict[tuple[str, int], int]:
    """Records to take per partition: everything, or ``budget`` shared evenly (water-filling)."""
    if budget is None:
        return dict(avail)
    take = dict.fromkeys(avail, 0)
    left = budget
    open_ = sorted((tp for tp, n in avail.items() if n > 0), key=lambda tp: avail[tp])
    while open_ and left > 0:
        share = max(1, left // len(open_))
        nxt = []
        for tp in open_:
            room = avail[tp] - take[tp]
            got = min(room, share, left)
            take[tp] += got
            left -= got
            if take[tp] < avail[tp]:
                nxt.append(tp)
            if left == 0:
                break
        open_ = nxt
    return take
