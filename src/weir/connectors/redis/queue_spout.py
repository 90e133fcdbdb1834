"""A Storm spout over a Redis list used as a reliable queue (``LMOVE`` to a processing list).

Producers ``LPUSH`` messages onto the queue; each spout task moves one message at a time to its own
processing list (``LMOVE queue processing RIGHT LEFT``, atomic: a message is always in one of the
two lists), emits it with its message id, and removes it from the processing list in ``ack`` (after
weir committed the batch it was in). On ``open`` a task moves whatever its processing list still
holds (a task that died before its acks) back to the queue, so it is redelivered; weir does not
count a redelivered message twice (its id is in the spout log).

Message ids must be stable across redelivery and unique per message: by default the message itself
is its id. A task that takes a message whose id it already holds (an equal message, still in a batch
not committed) keeps the copy in its processing list and emits it once the first one is acked, so
both are counted, one batch apart. Across tasks weir cannot tell an equal message from a
redelivery: a copy another task takes while the first is in an uncommitted batch is acked without
being counted. Give each message an id (``message_id=`` a function of the message, e.g. a JSON
field) when payloads repeat and the spout has more than one task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from weir.errors import SourceError
from weir.topology.components import Guarantee, OutputFieldsDeclarer, Spout
from weir.topology.context import TopologyContext
from weir.topology.spout_collector import SpoutOutputCollector

__all__ = ["RedisQueueSpout"]

log = logging.getLogger("weir.sources")


class RedisQueueSpout(Spout):
    """Consume the Redis list ``queue`` reliably: ``LMOVE`` to a processing list, ``LREM`` on ack.

    Parameters
    ----------
    url : ``redis://host:port/db`` (``rediss://`` for TLS; a password in the URL is never logged)
    queue : the list producers ``LPUSH`` onto
    fields : output field names; a message becomes one value (the first field), the message id
        another when ``id_field`` is given
    message_id : the id of a message (default: the message itself); must be the same on redelivery
    processing : the processing list of task *i* (default ``"<queue>:processing:<topology>:<spout>:<i>"``)
    max_per_call : messages one ``next_tuple`` moves at most (in one round trip)

    Examples
    --------
    >>> spout = RedisQueueSpout("redis://127.0.0.1:6379/0", "lines", fields=["line"])
    """

    guarantee = Guarantee.TRANSACTIONAL  # through the spout log: a batch replays the same tuples

    def __init__(
        self,
        url: str,
        queue: str,
        fields: Sequence[str] = ("message",),
        *,
        message_id: Callable[[str], Any] | None = None,
        processing: str | None = None,
        max_per_call: int = 100,
        id_field: str | None = None,
    ) -> None:
        if not isinstance(queue, str) or not queue:
            msg = f"RedisQueueSpout: queue must be a non-empty list name, got {queue!r}"
            raise SourceError(msg)
        self.url = url
        self.queue = queue
        self.fields = list(fields) + ([id_field] if id_field else [])
        self.id_field = id_field
        self.message_id = message_id
        self.processing_name = processing
        self.max_per_call = max_per_call
        self._client: Any = None
        self._held: dict[Any, str] = {}
        self._acks: list[str] = []  # acked messages not removed yet (flush_acks)
        #: messages taken whose id this instance held then (an equal message in flight): emitted later
        self._deferred: list[str] = []

    def __getstate__(self) -> dict[str, Any]:
        """Picklable before ``open`` and after: the connection is not copied."""
        state = dict(self.__dict__)
        state["_client"] = None
        state["_held"] = {}
        state["_acks"] = []
        state["_deferred"] = []
        return state

    def describe(self) -> str:
        """For messages (no password)."""
        from weir.connectors.redis.client import RedisSettings

        return f"RedisQueueSpout({RedisSettings.from_url(self.url).describe()}, queue={self.queue!r})"

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The message (and its id, with ``id_field``)."""
        declarer.declare(self.fields)

    def validate(self) -> None:
        """Submit time: the server answers."""
        from weir.connectors.redis.client import close_client, redis_client

        close_client(redis_client(self.url))

    # ---- Storm's ISpout ------------------------------------------------------------------------
    def open(self, conf: Mapping[str, Any], context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Connect, and move what this task's processing list holds back to the queue (redelivered)."""
        from weir.connectors.redis.client import redis_client

        self.collector = collector
        self.processing = self.processing_name or (
            f"{self.queue}:processing:{context.topology}:{context.component_id}:{context.task_index}"
        )
        if self.processing_name and context.parallelism > 1:
            self.processing = f"{self.processing_name}:{context.task_index}"
        self._client = redis_client(self.url)
        self._held, self._acks, self._deferred = {}, [], []
        moved = 0
        while self._client.lmove(self.processing, self.queue, "LEFT", "RIGHT") is not None:
            moved += 1
        if moved:
            log.info("%s: %d message(s) of %s back to the queue", self.describe(), moved, self.processing)

    def _id(self, message: str) -> Any:
        return message if self.message_id is None else self.message_id(message)

    def next_tuple(self) -> None:
        """Move up to ``max_per_call`` messages to the processing list and emit them.

        A message whose id this instance holds already (an equal message not acked yet) stays in
        the processing list and is emitted by a later call, once that id was acked.
        """
        waiting, self._deferred = self._deferred, []
        for message in waiting:
            self._take(message)
        pipe = self._client.pipeline(transaction=False)
        for _ in range(max(0, self.max_per_call - len(waiting))):
            pipe.lmove(self.queue, self.processing, "RIGHT", "LEFT")
        for raw in pipe.execute():
            if raw is None:
                break
            self._take(raw.decode() if isinstance(raw, bytes) else str(raw))

    def _take(self, message: str) -> None:
        """Emit ``message`` (in the processing list), or defer it while its id is held."""
        mid = self._id(message)
        if mid in self._held:
            self._deferred.append(message)
            return
        self._held[mid] = message
        values = [message, mid] if self.id_field else [message]
        self.collector.emit(values, msg_id=mid)

    def ack(self, msg_id: Any) -> bool:
        """Buffer the removal of the message from the processing list (sent by :meth:`flush_acks`).

        A message this instance does not hold (delivered before a restart, moved back to the queue
        by ``open``) is removed from the queue when the message is its own id; otherwise weir acks
        it when it is redelivered (``False``).
        """
        message = self._held.pop(msg_id, None)
        if message is not None:
            self._acks.append(message)
            return True
        if self.message_id is None and isinstance(msg_id, str):
            return bool(self._client.lrem(self.queue, -1, msg_id))
        return False

    def flush_acks(self) -> None:
        """Remove the acked messages from the processing list: one pipelined ``LREM`` each, one round trip.

        ``LREM … -1`` searches from the tail, where the oldest messages (the committed ones) are.
        """
        acks, self._acks = self._acks, []
        if not acks:
            return
        pipe = self._client.pipeline(transaction=False)
        for message in acks:
            pipe.lrem(self.processing, -1, message)
        pipe.execute()

    def fail(self, msg_id: Any) -> None:
        """Put the message back at the consuming end of the queue (redelivered next)."""
        message = self._held.pop(msg_id, None)
        if message is None:
            return
        pipe = self._client.pipeline(transaction=True)
        pipe.lrem(self.processing, 1, message)
        pipe.rpush(self.queue, message)
        pipe.execute()

    def close(self) -> None:
        """Close the connection (the processing list stays: the next ``open`` requeues it)."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
