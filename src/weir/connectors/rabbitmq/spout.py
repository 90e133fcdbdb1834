"""A Storm spout over a RabbitMQ queue: consume with manual acks, ack after weir's commit, requeue on fail.

The spout consumes with ``basic_consume`` (manual acknowledgement, ``prefetch`` unacked deliveries at
most) and emits every delivery with its message id; ``ack(msg_id)`` sends ``basic.ack`` once weir
has COMMITTED the batch holding the tuple, ``fail(msg_id)`` sends ``basic.nack`` with requeue. When
the connection dies (a driver crash, a broker restart), the broker requeues every unacked delivery;
weir's spout log keeps the ids of committed messages until they are redelivered and acked, and a
redelivered message is never counted twice.

A lost connection (seen by ``next_tuple``, ``flush_acks`` or ``fail``): its delivery tags are void,
so the spout logs the loss, drops what it held on that connection (buffered deliveries, the tags of
emitted ones, acks not sent) and connects again, retrying with back-off up to ``connect_timeout_s``;
past that ``next_tuple`` raises :class:`~weir.errors.TransientSourceError` (the batch attempt fails
and its retry connects again). ``flush_acks`` confirms its acks with a round trip (``basic.qos``),
so an ack written into a dead socket is reported as failed, never as sent. A delivery the broker
marks ``redelivered`` whose AMQP ``message_id`` property this process acked on that queue shortly
before (an ack the broker lost when it died) is acked again at once and not emitted
(:data:`RECENT_ACKS` ids per queue). Only the ``message_id`` property is trusted for that: an id
computed by a ``message_id=`` function, or a delivery without the ``redelivered`` flag, is never
acked from that memory (a repeated id there would be a new message acked without being counted).

Message ids must be stable across redelivery and unique per message for exactly-once: the default
is the AMQP ``message_id`` property (publishers should set it). A delivery without one gets an id
of its own delivery (``"<connection>:<delivery tag>"``), never the body: two messages with the same
body are two messages, but such a message is counted at least once, not exactly once (a
redelivery after a lost ack or a driver crash is a new delivery, counted again).

When a spout task of this process consumed the queue before (a reconnect, or a task opened again
or for the first time after another task consumed), it checks that the queue still exists before
it declares it again: a broker can lose a durable queue, with its persistent messages, in an
unclean restart (RabbitMQ 3.10 did so here in about one SIGKILL in eight under load, for a queue
declared just before the kill); the spout then logs a warning naming the queue and the broker
(``stats["vanished"]``), since the messages it held are gone and no redelivery of them will come.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from weir.errors import SourceError, TransientSourceError
from weir.topology.components import Guarantee, OutputFieldsDeclarer, Spout
from weir.topology.context import TopologyContext
from weir.topology.spout_collector import SpoutOutputCollector

__all__ = ["RECENT_ACKS", "RabbitMQSpout"]

log = logging.getLogger("weir.sources")

#: message ids this process remembers per queue after acking them (the newest ones), so that a
#: delivery the broker redelivers after losing the ack (a broker killed before it stored the ack)
#: is acked again, not counted twice
RECENT_ACKS = 10_000

_recent_lock = threading.Lock()
_recent: dict[tuple[str, int, str, str], OrderedDict[Any, None]] = {}  # (host, port, vhost, queue) -> ids
#: the queues a spout task of this process consumed: one missing later was lost by the broker
_consumed: set[tuple[str, int, str, str]] = set()


def _hashable(mid: Any) -> Any:
    return mid if isinstance(mid, (str, int, float, bool)) or mid is None else repr(mid)


def _pika() -> Any:
    try:
        import pika
    except ImportError as exc:  # pragma: no cover - the extra is not installed
        msg = "RabbitMQSpout needs pika: pip install 'weir[rabbitmq]'"
        raise SourceError(msg) from exc
    return pika


def _property_id(properties: Any) -> str | None:
    """The AMQP ``message_id`` property, or ``None`` when the publisher did not set one."""
    mid = getattr(properties, "message_id", None)
    return str(mid) if mid else None


class RabbitMQSpout(Spout):
    """Consume ``queue`` on the broker at ``url`` (``amqp://user:pass@host:port/vhost``), manual acks.

    Parameters
    ----------
    url : the AMQP URL (a password in it is never logged)
    queue : the queue to consume (declared durable unless ``declare=False``)
    fields : output field names; the body (decoded as UTF-8) is the first value, the message id
        follows when ``id_field`` is given
    message_id : ``f(body, properties)`` -> the message's id (default: ``properties.message_id``,
        else an id of the delivery itself: counted at least once); must be unique per message and
        the same when the broker redelivers it
    prefetch : unacked deliveries the broker sends this task at most (``basic.qos``); keep it at
        least ``topology.max.spout.pending``
    max_per_call : deliveries one ``next_tuple`` emits at most (the rest wait for the next call)
    connect_timeout_s : how long ``open``, and a reconnect after a lost connection, retry connecting
        (riding out a broker restart); past it :class:`~weir.errors.TransientSourceError`

    Examples
    --------
    >>> spout = RabbitMQSpout("amqp://guest:guest@127.0.0.1:5672/%2F", "lines", fields=["line"])
    """

    guarantee = Guarantee.TRANSACTIONAL  # through the spout log: a batch replays the same tuples

    def __init__(
        self,
        url: str,
        queue: str,
        fields: Sequence[str] = ("message",),
        *,
        message_id: Callable[[str, Any], Any] | None = None,
        id_field: str | None = None,
        prefetch: int = 1000,
        max_per_call: int = 1000,
        declare: bool = True,
        connect_timeout_s: float = 30.0,
    ) -> None:
        if not isinstance(queue, str) or not queue:
            msg = f"RabbitMQSpout: queue must be a non-empty queue name, got {queue!r}"
            raise SourceError(msg)
        if not isinstance(prefetch, int) or prefetch < 1:
            msg = f"RabbitMQSpout({queue!r}): prefetch must be a positive int, got {prefetch!r}"
            raise SourceError(msg)
        self.url = url
        self.queue = queue
        self.fields = list(fields) + ([id_field] if id_field else [])
        self.id_field = id_field
        self.message_id = message_id
        self.prefetch = prefetch
        self.max_per_call = max_per_call
        self.declare = declare
        self.connect_timeout_s = connect_timeout_s
        self._conn: Any = None
        self._channel: Any = None
        self._buffer: list[tuple[int, str, Any, bool]] = []  # (tag, body, id, id is the message_id property)
        self._held: dict[Any, list[int]] = {}
        self._acks: list[int] = []  # delivery tags acked, not sent yet (flush_acks)
        self._acked_ids: list[Any] = []  # the message ids of those tags
        self._remember: list[Any] = []  # those of them remembered in RECENT_ACKS once sent (see _trusted)
        #: held ids that are the AMQP message_id property: the only ones remembered in RECENT_ACKS
        self._trusted: set[Any] = set()
        self._incarnation = ""  # the connection's id, in the ids of deliveries without a message_id
        #: connection losses this instance recovered from, redelivered messages seen, acked again,
        #: queues found missing after a reconnect (the broker lost them)
        self.stats: dict[str, int] = {"losses": 0, "redelivered": 0, "reacked": 0, "vanished": 0}

    def __getstate__(self) -> dict[str, Any]:
        """Picklable before and after ``open``: the connection is not copied."""
        state = dict(self.__dict__)
        state.update(
            _conn=None, _channel=None, _buffer=[], _held={}, _acks=[], _acked_ids=[], _remember=[], _trusted=set()
        )
        return state

    def describe(self) -> str:
        """For messages (no password)."""
        pika = _pika()
        p = pika.URLParameters(self.url)
        return f"RabbitMQSpout(amqp://{p.host}:{p.port}/{p.virtual_host}, queue={self.queue!r})"

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The body (and the message id, with ``id_field``)."""
        declarer.declare(self.fields)

    def validate(self) -> None:
        """Submit time: the broker answers and the queue exists (or can be declared)."""
        conn, channel = self._connect(deadline=time.monotonic() + min(self.connect_timeout_s, 10.0))
        try:
            self._declare(channel)
        finally:
            conn.close()

    # ---- connections -----------------------------------------------------------------------------
    def _connect(self, deadline: float, *, transient: bool = False) -> tuple[Any, Any]:
        """Connect, retrying with back-off until ``deadline``.

        Past it: :class:`SourceError` (submit time), or with ``transient`` a
        :class:`TransientSourceError` (a running topology: the batch attempt fails and is retried).
        """
        pika = _pika()
        params = pika.URLParameters(self.url)
        delay = 0.1
        while True:
            try:
                conn = pika.BlockingConnection(params)
                return conn, conn.channel()
            except pika.exceptions.AMQPError as exc:
                if time.monotonic() + delay > deadline:
                    msg = f"{self.describe()}: cannot connect ({type(exc).__name__}: {exc}); is the broker running?"
                    if transient:
                        msg += f" (retried for connect_timeout_s={self.connect_timeout_s:g} s; the batch is retried)"
                        raise TransientSourceError(msg) from exc
                    raise SourceError(msg) from exc
                log.info("%s: cannot connect yet (%s); retrying in %.1f s", self.describe(), type(exc).__name__, delay)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _declare(self, channel: Any) -> None:
        pika = _pika()
        try:
            channel.queue_declare(self.queue, durable=True, passive=not self.declare)
        except pika.exceptions.ChannelClosedByBroker as exc:
            msg = f"{self.describe()}: the queue cannot be used ({exc}); create it, or let weir declare it"
            raise SourceError(msg) from exc

    # ---- Storm's ISpout ------------------------------------------------------------------------
    def open(self, conf: Mapping[str, Any], context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Connect (retrying up to ``connect_timeout_s``), set the prefetch and start consuming."""
        self.collector = collector
        self._start(time.monotonic() + self.connect_timeout_s)

    def _start(self, deadline: float) -> None:
        """Connect (until ``deadline``), set the prefetch, start consuming; nothing held yet."""
        self._buffer, self._held, self._acks = [], {}, []
        self._acked_ids, self._remember, self._trusted = [], [], set()
        self._conn, self._channel = self._connect(deadline, transient=True)
        self._incarnation = uuid.uuid4().hex[:12]
        self._consume()

    def _check_queue(self) -> None:
        """After a reconnect: warn when the queue is gone (the broker lost it, and its messages)."""
        pika = _pika()
        try:
            self._channel.queue_declare(self.queue, durable=True, passive=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code != 404:  # noqa: PLR2004 - AMQP's NOT_FOUND
                raise
            self.stats["vanished"] += 1
            log.warning(
                "%s: the queue no longer exists after the reconnect: the broker lost it (an unclean restart) "
                "with every message it held, and no redelivery of them will come; declaring it again. Check "
                "the broker's log; messages committed by weir and not acked stay in the spout log until "
                "topology.message.timeout.secs (at least 5 min) has passed",
                self.describe(),
            )
            self._channel = self._conn.channel()

    def _queue_key(self) -> tuple[str, int, str, str]:
        p = _pika().URLParameters(self.url)
        return (p.host, p.port, p.virtual_host, self.queue)

    def _consume(self) -> None:
        key = self._queue_key()
        with _recent_lock:
            seen = key in _consumed
        if seen and self.declare:  # consumed before by this process: is it still there?
            self._check_queue()
        self._declare(self._channel)
        self._channel.basic_qos(prefetch_count=self.prefetch)
        self._channel.basic_consume(self.queue, self._on_message, auto_ack=False)
        with _recent_lock:
            _consumed.add(key)

    def _lost(self, exc: BaseException, during: str) -> None:
        """The connection is gone: its delivery tags are void (the broker requeues every un-acked delivery)."""
        self.stats["losses"] += 1
        held = sum(len(t) for t in self._held.values())
        log.warning(
            "%s: connection lost during %s (%s: %s); %d emitted and %d buffered delivery(ies) and %d unsent "
            "ack(s) are void: the broker redelivers them; reconnecting",
            self.describe(), during, type(exc).__name__, exc, held, len(self._buffer), len(self._acks),
        )  # fmt: skip
        conn, self._conn, self._channel = self._conn, None, None
        self._buffer, self._held, self._acks = [], {}, []
        self._acked_ids, self._remember, self._trusted = [], [], set()
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already dead
                log.debug("%s: close of the lost connection failed", self.describe(), exc_info=True)

    def _reconnect(self) -> None:
        """Connect again after a loss (bounded by ``connect_timeout_s``), else :class:`TransientSourceError`."""
        try:
            self._start(time.monotonic() + self.connect_timeout_s)  # TransientSourceError past the timeout
        except _pika().exceptions.AMQPError as exc:  # lost again while declaring / consuming
            self._conn = self._channel = None
            msg = f"{self.describe()}: the connection was lost again while consuming ({type(exc).__name__}: {exc})"
            raise TransientSourceError(msg) from exc
        except TransientSourceError:
            self._conn = self._channel = None
            raise
        log.info("%s: connected again; un-acked deliveries come back redelivered", self.describe())

    def _recent(self) -> OrderedDict[Any, None]:
        key = self._queue_key()
        with _recent_lock:
            return _recent.setdefault(key, OrderedDict())

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        text = body.decode("utf-8", errors="replace")
        prop = _property_id(properties)
        trusted = self.message_id is None and prop is not None
        if self.message_id is not None:
            mid = self.message_id(text, properties)
        else:  # without a message_id property: this delivery's own id (never the body, which repeats)
            mid = prop if prop is not None else f"{self._incarnation}:{method.delivery_tag}"
        if method.redelivered:
            self.stats["redelivered"] += 1
        if method.redelivered and trusted:  # only a publisher's message_id is trusted to name one message
            recent = self._recent()
            with _recent_lock:
                again = _hashable(mid) in recent
            if again:  # acked by this process before the broker died: it lost the ack
                self.stats["reacked"] += 1
                log.info("%s: %r redelivered after it was acked (the broker lost the ack): acked again, "
                         "not emitted", self.describe(), mid)  # fmt: skip
                channel.basic_ack(method.delivery_tag)  # lost again with the connection: redelivered again
                return
        self._buffer.append((method.delivery_tag, text, mid, trusted))

    def next_tuple(self) -> None:
        """Emit up to ``max_per_call`` deliveries (waiting at most 50 ms for some when none is buffered).

        After a lost connection it connects again first (see :meth:`_reconnect`).
        """
        if self._conn is None:
            self._reconnect()
        if not self._buffer:
            try:
                self._conn.process_data_events(time_limit=0.05)
            except _pika().exceptions.AMQPError as exc:
                self._lost(exc, "next_tuple")
                self._reconnect()
                return
        buffered, self._buffer = self._buffer[: self.max_per_call], self._buffer[self.max_per_call :]
        for tag, text, mid, trusted in buffered:
            self._held.setdefault(mid, []).append(tag)
            if trusted:
                self._trusted.add(mid)
            values = [text, mid] if self.id_field else [text]
            self.collector.emit(values, msg_id=mid)

    def ack(self, msg_id: Any) -> bool:
        """Buffer the ``basic.ack`` of ``msg_id``'s deliveries (sent by :meth:`flush_acks`).

        ``False`` when this connection does not hold the message (delivered before a restart).
        """
        tags = self._held.pop(msg_id, None)
        if not tags or self._channel is None:
            return False
        self._acks.extend(tags)
        self._acked_ids.append(msg_id)
        if msg_id in self._trusted:
            self._trusted.discard(msg_id)
            self._remember.append(msg_id)
        return True

    def flush_acks(self) -> None:
        """Send the buffered acks: one ``basic.ack`` with ``multiple`` for the oldest run of them.

        ``multiple`` acknowledges every delivery up to a tag, so it covers the buffered tags below
        the oldest delivery still outstanding (emitted in a batch not committed yet, or buffered);
        any later buffered tag is acked on its own; a ``basic.qos`` round trip then confirms that the
        broker has them (methods on a channel are handled in order). Raises :class:`SourceError` when
        the connection is lost (the broker requeues them all; weir acks them on redelivery); the
        spout connects again on the next ``next_tuple``.
        """
        acks, self._acks = sorted(self._acks), []
        self._acked_ids = []
        ids, self._remember = self._remember, []
        if not acks:
            return
        outstanding = [t for tags in self._held.values() for t in tags] + [t for t, _x, _m, _t in self._buffer]
        below = min(outstanding, default=acks[-1] + 1)
        run = [t for t in acks if t < below]
        rest = [t for t in acks if t >= below]
        try:
            if run:
                self._channel.basic_ack(run[-1], multiple=True)
            for tag in rest:
                self._channel.basic_ack(tag)
            self._channel.basic_qos(prefetch_count=self.prefetch)  # the round trip: the acks reached the broker
        except (_pika().exceptions.AMQPError, AttributeError) as exc:
            self._acks = acks  # counted in the loss's warning, then dropped with the connection's tags
            self._lost(exc, "flush_acks")
            msg = f"{self.describe()}: {len(acks)} ack(s) failed ({type(exc).__name__}: {exc}); acked when redelivered"
            raise SourceError(msg) from exc
        recent = self._recent()
        with _recent_lock:
            for mid in ids:
                recent[_hashable(mid)] = None
                recent.move_to_end(_hashable(mid))
            while len(recent) > RECENT_ACKS:
                recent.popitem(last=False)

    def fail(self, msg_id: Any) -> None:
        """``basic.nack`` with requeue: the broker redelivers the message."""
        tags = self._held.pop(msg_id, None)
        self._trusted.discard(msg_id)
        if not tags or self._channel is None:
            return
        try:
            for tag in tags:
                self._channel.basic_nack(tag, requeue=True)
        except _pika().exceptions.AMQPError as exc:
            log.warning("%s: nack of %r failed (the broker requeues it anyway)", self.describe(), msg_id)
            self._lost(exc, "fail")

    def close(self) -> None:
        """Close the connection: the broker requeues every delivery not acked."""
        conn, self._conn, self._channel = self._conn, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a dead connection: nothing to close
                log.debug("%s: close failed", self.describe(), exc_info=True)
