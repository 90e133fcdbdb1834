"""Exactly-once output to Kafka: a Storm :class:`KafkaBolt` and a Trident :class:`KafkaStateFactory`.

Both publish each transaction's records in **one Kafka transaction together with a progress
marker** (a record ``{"txid": n, "records": k}`` keyed by the writer's transactional id in a marker
topic, ``weir.progress`` by default). Before publishing txid *n* a writer reads its last marker: if
it already covers *n*, the records are in Kafka and nothing is sent again. A ``read_committed``
consumer therefore sees every record exactly once, across driver crashes, replays and broker restarts.

Storm (``KafkaBolt``, a stateful bolt)
    1. ``execute`` collects the task's records; ``pre_prepare(n)`` stages them in the task's state,
       so they are prepared with the batch (durable before the batch counts as done).
    2. ``pre_commit(n)`` runs on the driver in the commit phase: it loads the staged records of *n*
       (prepared, or already committed when an earlier attempt crashed between the two) and
       publishes them with the marker, unless the marker covers *n*.
    3. A crash anywhere after the coordinator stored ``COMMITTING(n)`` is rolled forward by
       recovery, which runs ``pre_commit(n)`` again: it publishes what the marker does not cover.
    The records of *n* are fixed once prepared, so this holds whatever the grouping.

Trident (``partition_persist`` into a ``KafkaStateFactory`` state)
    ``commit(n)`` of each state partition publishes that partition's records of batch *n* with the
    partition's marker. A replay of *n* (same txid, same tuples: a transactional spout, and the
    stream partitioned by ``partition_by`` fields or a state parallelism of 1) finds the marker and
    sends nothing. The state declares ``StateType.TRANSACTIONAL``, so weir refuses an opaque spout.

Markers are bound to the writer
    A marker also names its writer: ``{"txid": n, "records": k, "topic": ..., "writer": id}``. A
    ``KafkaBolt`` task's id is made once and kept in the task's state (the topology's store), so it
    is the same across restarts and differs for another deployment that happens to use the same
    topology name on the same cluster; a Trident state's id is its ``transactional_id`` and topic.
    A last marker that is not such a JSON object (malformed), or that another writer wrote
    (foreign), is never trusted: publishing stops with a :class:`~weir.errors.StateError` naming the
    transactional id, the marker topic and both writers.

Transaction timeout
    ``transaction.timeout.ms`` in ``config`` is respected (default 60000). At submit, a
    ``KafkaBolt`` or ``KafkaStateFactory`` checks it against the brokers' ``transaction.max.timeout.ms`` and against the
    checkpoint interval plus the supervision budget (the waits of ``weir.restart.max`` restarts),
    so a broker that would refuse the producer fails the submit, not the first commit.

Failures
    Any failed publish aborts the transaction and drops the producer; the next attempt makes a new
    one (``init_transactions`` fences and aborts whatever the old one left open) and reads the last
    marker again, so an indefinite outcome (a commit whose answer was lost) is settled by the marker,
    never guessed. A transaction of another producer left open on the output topic keeps
    ``read_committed`` readers from seeing anything after it; :meth:`TransactionalPublisher.check_stable`
    names such a hanging transaction and the remedy.

Cost: one Kafka transaction (begin, records, marker, commit: two extra round trips plus the commit
markers' writes) per task or state partition per batch; the marker topic grows by one small record
per writer and batch (compacted).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from weir._faults import crash_point
from weir.connectors.kafka.client import (
    admin,
    check_settings,
    client_module,
    describe_servers,
    error_callback,
    explain,
    serve_errors,
)
from weir.errors import ConfigError, StateError
from weir.topology.components import StatefulBolt
from weir.trident.operation import StateUpdater
from weir.trident.state.base import State, StateFactory, StateType, check_partition

if TYPE_CHECKING:
    from weir.state.base import State as StormState
    from weir.topology.context import TopologyContext
    from weir.topology.tuple import Tuple
    from weir.trident.tuple import TridentTuple

__all__ = ["KafkaBolt", "KafkaState", "KafkaStateFactory", "KafkaStateUpdater", "TransactionalPublisher"]

log = logging.getLogger("weir.sinks")

DEFAULT_MARKER_TOPIC = "weir.progress"
_STAGED = "kafka.staged"
_WRITER = "kafka.writer"
#: the producer's transaction timeout when ``config`` does not set ``transaction.timeout.ms``
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000

#: one publisher per transactional id and process (the producer's init_transactions is costly)
_PUBLISHERS: dict[tuple[Any, ...], TransactionalPublisher] = {}
_LOCK = threading.Lock()

Record = tuple[Any, Any]  # (key, value): str, bytes or None


class TransactionalPublisher:
    """Publishes a txid's records to ``topic`` at most once, in one Kafka transaction with a marker.

    ``transactional_id`` names the writer (unique per task or state partition); a new publisher
    with the same id fences an older one (a zombie's open transaction is aborted).
    """

    def __init__(
        self,
        settings: Mapping[str, str],
        topic: str,
        transactional_id: str,
        marker_topic: str = DEFAULT_MARKER_TOPIC,
        timeout_s: float = 60.0,
        writer: str | None = None,
    ) -> None:
        self.settings = dict(settings)
        self.topic = topic
        self.transactional_id = transactional_id
        self.marker_topic = marker_topic
        self.timeout_s = timeout_s
        #: who this writer is: markers of another writer under the same transactional id are refused
        self.writer = writer if writer is not None else f"{transactional_id}@{topic}"
        self._producer: Any = None
        self._marker: int | None = None  # the last txid this writer published (None: unknown yet)

    @classmethod
    def get(
        cls,
        settings: Mapping[str, str],
        topic: str,
        transactional_id: str,
        marker_topic: str,
        writer: str | None = None,
    ) -> TransactionalPublisher:
        """The cached publisher of this writer in this process."""
        key = (tuple(sorted(settings.items())), topic, transactional_id, marker_topic, writer)
        with _LOCK:
            pub = _PUBLISHERS.get(key)
            if pub is None:
                pub = cls(settings, topic, transactional_id, marker_topic, writer=writer)
                _PUBLISHERS[key] = pub
        return pub

    @property
    def transaction_timeout_ms(self) -> int:
        """The producer's ``transaction.timeout.ms``: the user's setting, or 60000."""
        return transaction_timeout_ms(self.settings, self.describe())

    def describe(self) -> str:
        """For messages: the writer, the topic and the brokers."""
        return f"Kafka writer {self.transactional_id!r} (topic {self.topic!r} on {describe_servers(self.settings)})"

    # ---- marker ------------------------------------------------------------------------------
    def _marker_partition(self, partitions: int) -> int:
        return zlib.crc32(self.transactional_id.encode()) % partitions

    def ensure_topics(self) -> None:
        """The output topic must exist; the marker topic is created (compacted) when missing."""
        ck = client_module()
        md = admin(self.settings).list_topics(timeout=self.timeout_s)
        if self.topic not in md.topics or md.topics[self.topic].error is not None:
            msg = f"{self.describe()}: the output topic {self.topic!r} does not exist; create it first"
            raise ConfigError(msg)
        if self.marker_topic in md.topics and md.topics[self.marker_topic].error is None:
            return
        rf = min(3, len(md.brokers))
        new = ck.admin.NewTopic(self.marker_topic, 1, rf, config={"cleanup.policy": "compact"})
        fut = admin(self.settings).create_topics([new], request_timeout=self.timeout_s)[self.marker_topic]
        try:
            fut.result(self.timeout_s)
        except ck.KafkaException as exc:
            if exc.args[0].code() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def last_marker(self) -> int | None:
        """The txid of this writer's last committed marker (``None``: it never published)."""
        ck = client_module()
        offset_spec = ck.admin.OffsetSpec
        md = admin(self.settings).list_topics(self.marker_topic, timeout=self.timeout_s)
        part = self._marker_partition(len(md.topics[self.marker_topic].partitions))
        tp = ck.TopicPartition(self.marker_topic, part)
        req = {tp: offset_spec.latest()}
        end = (
            admin(self.settings)
            .list_offsets(req, isolation_level=ck.IsolationLevel.READ_COMMITTED, request_timeout=self.timeout_s)[tp]
            .result(self.timeout_s)
            .offset
        )
        low = (
            admin(self.settings)
            .list_offsets({tp: offset_spec.earliest()}, request_timeout=self.timeout_s)[tp]
            .result(self.timeout_s)
            .offset
        )
        consumer = ck.Consumer(
            {
                **self.settings,
                "group.id": "weir-marker-reader",
                "enable.auto.commit": "false",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            window = 64
            while True:
                first = max(low, end - window)
                found = self._scan(consumer, ck, part, first, end)
                if found is not None or first <= low:
                    return found
                window *= 4
        finally:
            consumer.close()

    def _scan(self, consumer: Any, ck: Any, part: int, first: int, end: int) -> int | None:
        """The txid of the last marker of this writer's key in ``[first, end)`` (checked), or None."""
        if end <= first:
            return None
        consumer.assign([ck.TopicPartition(self.marker_topic, part, first)])
        key = self.transactional_id.encode()
        last: tuple[Any, int] | None = None
        deadline = time.monotonic() + self.timeout_s
        while True:
            pos = consumer.position([ck.TopicPartition(self.marker_topic, part)])[0].offset
            if pos >= end:
                return None if last is None else self._check_marker(last[0], part, last[1])
            for m in consumer.consume(1000, 0.5):
                if m.error() is not None or m.offset() >= end:
                    continue
                if m.key() == key:
                    last = (m.value(), m.offset())
            if time.monotonic() > deadline:
                msg = f"{self.describe()}: reading the progress markers in {self.marker_topic!r} timed out"
                raise StateError(msg)

    def _check_marker(self, raw: Any, part: int, offset: int) -> int:
        """The txid of a marker of this transactional id; a malformed or foreign one is refused."""
        where = (
            f"{self.describe()}: the progress marker at {self.marker_topic!r} partition {part} offset {offset} "
            f"(key {self.transactional_id!r})"
        )
        try:
            value = json.loads(raw) if raw is not None else None
        except (ValueError, UnicodeDecodeError) as exc:
            value, why = None, f"is not JSON ({exc})"
        else:
            why = "is not a weir marker (a JSON object with txid, records, topic and writer)"
        ok = (
            isinstance(value, dict)
            and isinstance(value.get("txid"), int)
            and not isinstance(value.get("txid"), bool)
            and isinstance(value.get("writer"), str)
        )
        if not ok:
            msg = (
                f"{where} {why}: {str(raw)[:200]}. weir never trusts it; something other than this writer "
                f"writes to {self.marker_topic!r} under this key. Stop that writer, or give this output its "
                "own marker_topic (or the topology its own name)"
            )
            raise StateError(msg)
        assert isinstance(value, dict)
        if value["writer"] != self.writer or value.get("topic", self.topic) != self.topic:
            msg = (
                f"{where} was written by writer {value['writer']!r} for topic {value.get('topic')!r}, not by this "
                f"one ({self.writer!r} for {self.topic!r}): another deployment uses the same transactional id on "
                "this cluster (a topology of the same name with another store?). weir does not trust its "
                "progress; give this topology its own name (or the Trident state its own transactional_id), or "
                "its own marker_topic"
            )
            raise StateError(msg)
        return int(value["txid"])

    def check_stable(self, wait_s: float = 0.0) -> None:
        """Refuse an output topic with a hanging transaction: a last stable offset that does not move.

        A transaction another producer left open (a crashed producer whose transactional id is never
        used again) keeps ``read_committed`` readers from every record after it until the broker's
        ``transaction.timeout.ms`` aborts it. The last stable offset of each partition is compared
        with its high watermark, twice, ``wait_s`` apart; a partition behind both times is named.

        Raises
        ------
        StateError
            A partition's last stable offset is stuck below its high watermark.
        """
        ck = client_module()
        offset_spec = ck.admin.OffsetSpec
        md = admin(self.settings).list_topics(self.topic, timeout=self.timeout_s)
        tps = [ck.TopicPartition(self.topic, p) for p in sorted(md.topics[self.topic].partitions)]

        def ends(level: Any) -> dict[int, int]:
            futs = admin(self.settings).list_offsets(
                dict.fromkeys(tps, offset_spec.latest()), isolation_level=level, request_timeout=self.timeout_s
            )
            return {tp.partition: int(f.result(self.timeout_s).offset) for tp, f in futs.items()}

        first = ends(ck.IsolationLevel.READ_COMMITTED)
        high = ends(ck.IsolationLevel.READ_UNCOMMITTED)
        if all(first[p] >= high[p] for p in first):
            return  # nothing open (the usual case: no wait)
        if wait_s > 0:
            time.sleep(wait_s)
        stable = ends(ck.IsolationLevel.READ_COMMITTED)
        stuck = {p: (stable[p], high[p]) for p in stable if stable[p] < high[p] and stable[p] == first[p]}
        if stuck:
            shown = ", ".join(
                f"partition {p}: last stable offset {s}, high watermark {h}" for p, (s, h) in stuck.items()
            )
            msg = (
                f"{self.describe()}: a transaction is hanging on the output topic ({shown}): read_committed "
                "readers see nothing after it. Find the producer with kafka-transactions.sh list / describe, "
                "then end it: restart that producer with its transactional.id, or kafka-transactions.sh abort "
                f"--topic {self.topic} --partition P --start-offset S (the broker aborts it by itself after its "
                "transaction.timeout.ms)"
            )
            raise StateError(msg)

    # ---- publishing --------------------------------------------------------------------------
    def _open(self) -> Any:
        if self._producer is None:
            ck = client_module()
            self.ensure_topics()
            p = ck.Producer(
                {
                    "transaction.timeout.ms": str(DEFAULT_TRANSACTION_TIMEOUT_MS),
                    **self.settings,
                    "transactional.id": self.transactional_id,
                    "linger.ms": "5",
                    "error_cb": error_callback(self.settings),
                }
            )
            p.init_transactions(self.timeout_s)  # fences older producers of this id, aborts their transaction
            self._producer = p
            self._marker = self.last_marker()
            try:  # once per producer: a transaction another producer left open blocks every reader
                self.check_stable(wait_s=2.0)
            except StateError as exc:
                log.error("%s", exc)
        return self._producer

    def published(self, txid: int) -> bool:
        """Whether this writer's marker covers ``txid``.

        Raises
        ------
        StateError
            The brokers cannot be reached or refuse this writer (secrets redacted).
        """
        try:
            self._open()
        except Exception as exc:
            self._reset(client_module())
            if isinstance(exc, (ConfigError, StateError)):
                raise
            msg = f"{self.describe()}: opening the transactional producer failed: {explain(self.settings, exc)}"
            raise StateError(msg) from exc
        return self._marker is not None and self._marker >= txid

    def publish(self, txid: int, records: Sequence[Record], headers: Sequence[tuple[str, bytes]] | None = None) -> int:
        """Send ``records`` and the marker of ``txid`` in one transaction; 0 if the marker already covers it.

        Raises
        ------
        StateError
            The transaction failed (it is aborted; the caller's batch fails and is retried).
        """
        ck = client_module()
        try:
            p = self._open()
            if self._marker is not None and self._marker >= txid:
                return 0
            p.begin_transaction()
            for i, (k, v) in enumerate(records):
                while True:
                    try:
                        p.produce(self.topic, key=k, value=v, headers=list(headers) if headers else None)
                        break
                    except BufferError:
                        p.poll(0.05)
                if i % 10_000 == 0:
                    p.poll(0)
            marker = json.dumps({"txid": txid, "records": len(records), "topic": self.topic, "writer": self.writer})
            p.produce(
                self.marker_topic,
                key=self.transactional_id,
                value=marker,
                partition=self._marker_partition(self._marker_partitions()),
            )
            p.commit_transaction(self.timeout_s)
        except Exception as exc:
            self._reset(ck)
            if isinstance(exc, (ConfigError, StateError)):
                raise
            why = explain(self.settings, exc)
            msg = f"{self.describe()}: publishing txid {txid} ({len(records)} records) failed: {why}"
            raise StateError(msg) from exc
        self._marker = txid
        return len(records)

    def _marker_partitions(self) -> int:
        md = admin(self.settings).list_topics(self.marker_topic, timeout=self.timeout_s)
        return len(md.topics[self.marker_topic].partitions)

    def _reset(self, ck: Any) -> None:
        """Forget the producer (a fresh one aborts what this one left open) and the cached marker."""
        serve_errors(self._producer)
        serve_errors(admin(self.settings))
        p, self._producer, self._marker = self._producer, None, None
        if p is not None:
            try:
                p.abort_transaction(5)
            except Exception:  # noqa: S110 - the next init_transactions aborts it anyway
                pass


def transaction_timeout_ms(settings: Mapping[str, str], where: str) -> int:
    """The ``transaction.timeout.ms`` of ``settings`` (default 60000), checked to be a positive integer."""
    raw = settings.get("transaction.timeout.ms", str(DEFAULT_TRANSACTION_TIMEOUT_MS))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        msg = f"{where}: transaction.timeout.ms must be a positive number of milliseconds, got {raw!r}"
        raise ConfigError(msg)
    return value


def supervision_budget_ms(conf: Mapping[str, Any]) -> int:
    """The checkpoint interval plus every wait of a full row of supervised restarts, in milliseconds."""
    interval = int(conf.get("topology.state.checkpoint.interval.ms", 1000))
    restarts = int(conf.get("weir.restart.max", 5))
    backoff = int(conf.get("weir.restart.backoff.ms", 1000))
    waits = sum(min(backoff << (i - 1), 60_000) for i in range(1, restarts + 1))
    return interval + waits


def check_transaction_timeout(settings: Mapping[str, str], conf: Mapping[str, Any], where: str) -> int:
    """Submit-time check of the producer's ``transaction.timeout.ms``; returns it.

    It must not exceed the brokers' ``transaction.max.timeout.ms`` (the broker would refuse the
    producer at the first commit, after the state committed), and must cover the checkpoint interval
    plus the supervision budget (``weir.restart.max`` restarts of ``weir.restart.backoff.ms``,
    doubling): a transaction that the broker aborts on its own while weir still waits to publish
    again would leave the output behind the state.

    Raises
    ------
    ConfigError
        Either bound is broken (both values and the setting to change are named).
    """
    ck = client_module()
    value = transaction_timeout_ms(settings, where)
    budget = supervision_budget_ms(conf)
    if value < budget:
        msg = (
            f"{where}: transaction.timeout.ms = {value} is below the checkpoint interval plus the supervision "
            f"budget ({budget} ms: topology.state.checkpoint.interval.ms + the waits of weir.restart.max restarts "
            "from weir.restart.backoff.ms); raise transaction.timeout.ms in the writer's config, or lower "
            "weir.restart.max / weir.restart.backoff.ms"
        )
        raise ConfigError(msg)
    client = admin(settings)
    try:
        md = client.list_topics(timeout=30)
        broker = sorted(md.brokers)[0]
        res = ck.admin.ConfigResource("broker", str(broker))
        configs = client.describe_configs([res], request_timeout=30)[res].result(30)
    except Exception as exc:
        msg = f"{where}: reading the brokers' transaction.max.timeout.ms failed: {explain(settings, exc)}"
        raise ConfigError(msg) from exc
    entry = configs.get("transaction.max.timeout.ms")
    limit = int(entry.value) if entry is not None and entry.value is not None else 900_000
    if value > limit:
        msg = (
            f"{where}: transaction.timeout.ms = {value} is above the brokers' transaction.max.timeout.ms = {limit} "
            f"(broker {broker} of {describe_servers(settings)}): the broker would refuse the transactional producer "
            "at the first commit. Set transaction.timeout.ms to at most that in the writer's config, or raise "
            "transaction.max.timeout.ms on the brokers"
        )
        raise ConfigError(msg)
    return value


def _enc(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"b64": base64.b64encode(bytes(v)).decode()}
    return json.dumps(v, separators=(",", ":"), sort_keys=True)


def _dec(v: Any) -> Any:
    if isinstance(v, dict):
        return base64.b64decode(v["b64"])
    return v


def _to_bytes_or_text(v: Any, what: str, where: str) -> Any:
    if v is None or isinstance(v, (str, bytes)):
        return v
    if isinstance(v, (int, float, bool, dict, list)):
        return json.dumps(v, separators=(",", ":"), sort_keys=True)
    msg = f"{where}: {what} of type {type(v).__name__} cannot be written to Kafka (use str, bytes or JSON values)"
    raise StateError(msg)


# ---- Storm ---------------------------------------------------------------------------------------
class KafkaBolt(StatefulBolt["StormState"]):
    """Writes each tuple's ``key_field`` / ``value_field`` to ``topic``, exactly once (see the module docs).

    Parameters
    ----------
    bootstrap_servers : ``"host:port[,host:port...]"``
    topic : the output topic (must exist)
    value_field : the field written as the record value (``str``, ``bytes``; other values as JSON)
    key_field : the field written as the record key (``None``: no key)
    config : client settings passed through (``security.protocol``, ``sasl.*``, ``ssl.*``, ...)
    marker_topic : where the progress markers go (created, compacted, when missing)

    Storm's ``KafkaBolt`` (at-least-once) maps as: ``withTopicSelector`` → ``topic``,
    ``FieldNameBasedTupleToKafkaMapper(key, message)`` → ``key_field``/``value_field``,
    ``withProducerProperties`` → ``config``.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        value_field: str = "message",
        key_field: str | None = "key",
        *,
        config: Mapping[str, Any] | None = None,
        marker_topic: str = DEFAULT_MARKER_TOPIC,
    ) -> None:
        self.settings = check_settings(bootstrap_servers, config, "KafkaBolt")
        if not isinstance(topic, str) or not topic:
            msg = f"KafkaBolt: topic must be a non-empty name, got {topic!r}"
            raise ConfigError(msg)
        self.topic = topic
        self.value_field = value_field
        self.key_field = key_field
        self.marker_topic = marker_topic
        self._records: list[list[Any]] = []

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext, collector: Any) -> None:
        """Keep the context (the transactional id is ``weir-<topology>-<component>-<task>``)."""
        super().prepare(conf, context, collector)
        self.context = context
        self.conf = conf
        self._records = []

    def init_state(self, state: StormState) -> None:
        """Keep the task's state: the records are staged in it."""
        self.state: Any = state

    def check_submit(self, conf: Mapping[str, Any]) -> None:
        """Submit-time: ``transaction.timeout.ms`` against the brokers and the supervision budget."""
        check_transaction_timeout(self.settings, conf, f"KafkaBolt(topic {self.topic!r})")

    def execute(self, tup: Tuple) -> None:
        """Collect the record; it is published when the batch commits."""
        where = f"KafkaBolt {self.context.component_id!r} task {self.context.task_index}"
        k = None if self.key_field is None else _to_bytes_or_text(tup[self.key_field], "key", where)
        v = _to_bytes_or_text(tup[self.value_field], "value", where)
        self._records.append([_enc(k), _enc(v)])
        self.collector.ack(tup)

    def pre_prepare(self, txid: int) -> None:
        """Stage this task's records of ``txid`` in its state (prepared with the batch).

        The task's writer id is made once, on the first batch, and kept in the same state: it binds
        the task's progress markers to this deployment's store.
        """
        writer = self.state.get(_WRITER)
        if not isinstance(writer, str):
            writer = f"{self._tid()}/{uuid.uuid4().hex}"
            self.state.put(_WRITER, writer)
        self.state.put(_STAGED, {"txid": txid, "records": self._records, "writer": writer})
        self._records = []  # the instance may live on into the next batch (prepare() runs once per instance)

    def _tid(self) -> str:
        ctx = self.context
        return f"weir-{ctx.topology}-{ctx.component_id}-{ctx.task_index}"

    def _publisher(self, writer: str | None = None) -> TransactionalPublisher:
        return TransactionalPublisher.get(self.settings, self.topic, self._tid(), self.marker_topic, writer)

    def pre_commit(self, txid: int) -> None:
        """Publish the staged records of ``txid`` with the marker, unless the marker covers it."""
        from weir.state.factory import StateFactory as StormStateFactory

        ns = self.context.state_namespace
        state: Any = StormStateFactory.get_state(ns, self.conf, self.context)
        staged = None
        prepared = state.backend.load_prepared(ns)
        if prepared is not None and prepared[0] == txid:
            raw = prepared[1].get(state.key_serializer.serialize(_STAGED))
            staged = None if raw is None else state.value_serializer.deserialize(raw)
        if staged is None or staged.get("txid") != txid:
            staged = state.get(_STAGED)  # an earlier attempt committed the state, then crashed
        if not isinstance(staged, dict) or staged.get("txid") != txid or not staged.get("records"):
            return  # this task had nothing staged for txid
        writer = staged.get("writer")
        pub = self._publisher(writer if isinstance(writer, str) else None)
        if pub.published(txid):
            return
        records = [(_dec(k), _dec(v)) for k, v in staged["records"]]
        pub.publish(txid, records)
        crash_point("kafka_after_publish", txid, task=self.context.task_index)


# ---- Trident -------------------------------------------------------------------------------------
class KafkaState(State):
    """One partition of a Kafka output state: the batch's records, published at ``commit(txid)``."""

    def __init__(self, publisher: TransactionalPublisher) -> None:
        self.publisher = publisher
        self.txid: int | None = None
        self.records: list[Record] = []

    def begin_commit(self, txid: int | None) -> None:
        """Start batch ``txid``."""
        if txid is None:
            msg = f"{self.publisher.describe()}: a Kafka state needs a batch txid (exactly-once output)"
            raise StateError(msg)
        self.txid, self.records = txid, []

    def add(self, key: Any, value: Any) -> None:
        """Queue one record of the open batch."""
        self.records.append((key, value))

    def commit(self, txid: int | None) -> None:
        """Publish the batch's records with the marker (nothing if the marker covers ``txid``)."""
        if txid is None or txid != self.txid:
            msg = f"{self.publisher.describe()}: commit({txid}) does not match the open batch {self.txid}"
            raise StateError(msg)
        if self.records:  # an empty batch needs no transaction (the marker only covers what was sent)
            self.publisher.publish(txid, self.records)
        self.records = []


class KafkaStateFactory(StateFactory):
    """Trident states writing to ``topic`` exactly once (``partition_persist(factory, fields, KafkaStateUpdater())``).

    ``transactional_id`` names this writer; partition *i* uses ``<transactional_id>-<i>``. It must
    be unique among the writers of the brokers and stay the same across restarts.
    """

    state_type = StateType.TRANSACTIONAL

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        transactional_id: str,
        *,
        config: Mapping[str, Any] | None = None,
        marker_topic: str = DEFAULT_MARKER_TOPIC,
    ) -> None:
        self.settings = check_settings(bootstrap_servers, config, "KafkaStateFactory")
        if not isinstance(topic, str) or not topic:
            msg = f"KafkaStateFactory: topic must be a non-empty name, got {topic!r}"
            raise ConfigError(msg)
        if not isinstance(transactional_id, str) or not transactional_id:
            msg = f"KafkaStateFactory: transactional_id must be a non-empty string, got {transactional_id!r}"
            raise ConfigError(msg)
        self.topic, self.transactional_id, self.marker_topic = topic, transactional_id, marker_topic

    def check_submit(self, conf: Mapping[str, Any]) -> None:
        """Submit-time: ``transaction.timeout.ms`` against the brokers and the supervision budget."""
        check_transaction_timeout(self.settings, conf, f"KafkaStateFactory(topic {self.topic!r})")

    def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> KafkaState:
        """The state of partition ``partition_index``."""
        check_partition(partition_index, num_partitions, what=f"KafkaStateFactory({self.topic!r})")
        tid = f"{self.transactional_id}-{partition_index}"
        return KafkaState(TransactionalPublisher.get(self.settings, self.topic, tid, self.marker_topic))


class KafkaStateUpdater(StateUpdater[KafkaState]):
    """Queues each tuple's ``key_field`` / ``value_field`` as a record of the batch."""

    def __init__(self, value_field: str = "message", key_field: str | None = "key") -> None:
        self.value_field, self.key_field = value_field, key_field

    def update_state(self, state: KafkaState, tuples: list[TridentTuple], collector: Any) -> None:
        """Add every tuple's record to the state."""
        where = f"KafkaStateUpdater({state.publisher.topic!r})"
        for t in tuples:
            k = None
            if self.key_field is not None:
                k = _to_bytes_or_text(t.get_value_by_field(self.key_field), "key", where)
            state.add(k, _to_bytes_or_text(t.get_value_by_field(self.value_field), "value", where))
