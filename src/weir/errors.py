"""The weir exception tree.

::

    WeirError                        root of every error weir raises
    ├── ConfigError (ValueError)     bad or missing configuration, unreachable server at submit time
    ├── StateError (RuntimeError)    state misuse or a failed state operation
    │   ├── FencedError              a newer driver took over this topology (epoch fencing)
    │   ├── StateLossError           committed state was lost, or the store disagrees with Spark's checkpoint
    │   │                            (also a CheckpointError)
    │   ├── StoreUnavailableError    the store did not answer in time (refused, timed out, frozen): retriable
    │   └── SerializationError (TypeError-like)   a key or value that cannot be (de)serialized
    ├── TopologyError (RuntimeError) bad topology wiring, or a user function failing inside a task
    ├── CheckpointError (RuntimeError) coordinator / Streams checkpoint failures, corrupt checkpoint data
    ├── SourceError (RuntimeError)   a spout/source cannot read what it promised (permanent: the run stops)
    │   └── TransientSourceError     a source briefly unavailable (a broker restarting, a leader moving):
    │                                supervision restarts the query with back-off
    └── SparkDiedError (RuntimeError) Spark's JVM (the driver's Java process) died: not retried

    NotDurableWarning (UserWarning)  state that lives only as long as the run (in-memory providers on Spark)

Every message names the ids involved (topology, component, task, namespace, txid) and says what to do.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "ConfigError",
    "FencedError",
    "NotDurableWarning",
    "SerializationError",
    "SourceError",
    "SparkDiedError",
    "StateError",
    "StateLossError",
    "StoreUnavailableError",
    "TopologyError",
    "TransientSourceError",
    "WeirError",
]


class WeirError(Exception):
    """Root of every error raised by weir."""


class ConfigError(WeirError, ValueError):
    """Configuration is malformed, has unknown keys or wrong types, or names an unreachable server."""


class StateError(WeirError, RuntimeError):
    """A state operation was misused or failed (names the namespace and txids involved)."""


class FencedError(StateError):
    """A newer driver holds a higher epoch for this topology; this one must stop and commit nothing."""


class StoreUnavailableError(StateError):
    """The store did not answer within its bound (connection refused or lost, a timeout, a frozen server).

    Retriable: a supervised run restarts the query after it (``weir.restart.max``, with back-off),
    and recovery resolves the transaction in flight; past the restarts the run stops with it.
    """


class SerializationError(StateError, TypeError):
    """A key or value cannot be serialized or deserialized by the configured serializer."""


class TopologyError(WeirError, RuntimeError):
    """The topology is wired wrongly, or a user component failed inside a task.

    When raised for a failing task, ``component``, ``task``, ``txid`` and ``remote_traceback``
    carry the details.
    """

    def __init__(
        self,
        message: str,
        *,
        topology: str | None = None,
        component: str | None = None,
        task: int | None = None,
        txid: int | None = None,
        remote_traceback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.topology = topology
        self.component = component
        self.task = task
        self.txid = txid
        self.remote_traceback = remote_traceback

    def __str__(self) -> str:
        base = super().__str__()
        if self.remote_traceback:
            return f"{base}\n--- original traceback (task) ---\n{self.remote_traceback.rstrip()}"
        return base


class CheckpointError(WeirError, RuntimeError):
    """The checkpoint coordinator or a Streams checkpoint failed, or checkpoint data is corrupt."""


class StateLossError(StateError, CheckpointError):
    """The store lost committed state, or it and Spark's checkpoint disagree on where the topology is.

    Raised at start (the store is behind or ahead of Spark's checkpoint, or the checkpoint is missing
    or another query's and the sources cannot resume from the store's offsets) and while running (a
    fenced write found the store emptied or rolled back: its epoch is lower than the one this driver
    took, or the coordinator record is gone). Nothing is written after it.
    """


class SourceError(WeirError, RuntimeError):
    """A source cannot deliver the range it promised (trimmed, expired, reset under committed offsets).

    ``retriable`` tells supervision what to do: ``False`` (this class) stops the run with the error;
    ``True`` (:class:`TransientSourceError`) restarts the query with back-off (``weir.restart.max``,
    ``weir.restart.backoff.ms``), which replays the batch exactly.
    """

    retriable: bool = False


class TransientSourceError(SourceError):
    """A source that should answer again soon (a broker restarting, a partition leader moving, a timeout).

    Raised after the source's own short retries ran out; supervision restarts the query with
    back-off. The class name appears in a Spark worker's traceback, so supervision recognises it
    in a failed query's text as well.
    """

    retriable = True


class SparkDiedError(WeirError, RuntimeError):
    """Spark's JVM died under the driver (killed, out of memory): the run stops; a new driver recovers."""


class NotDurableWarning(UserWarning):
    """State kept for one run only (Storm's in-memory providers on Spark local mode): lost on restart."""
