"""The weir exception tree.

::

    WeirError                        root of every error weir raises
    ├── ConfigError (ValueError)     bad or missing configuration, unreachable server at submit time
    ├── StateError (RuntimeError)    state misuse or a failed state operation
    │   ├── FencedError              a newer driver took over this topology (epoch fencing)
    │   ├── StoreUnavailableError    the store did not answer in time (refused, timed out, frozen): retriable
    │   └── SerializationError (TypeError-like)   a key or value that cannot be (de)serialized
    ├── TopologyError (RuntimeError) bad topology wiring, or a user function failing inside a task
    ├── CheckpointError (RuntimeError) coordinator / Streams checkpoint failures, corrupt checkpoint data
    │   └── StateLossError           the store is behind Spark's commit log: committed state was lost
    ├── SourceError (RuntimeError)   a spout/source cannot read what it promised
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


class StateLossError(CheckpointError):
    """The store lost committed data: its coordinator record is behind Spark's commit log."""


class SourceError(WeirError, RuntimeError):
    """A source cannot deliver the range it promised (trimmed, expired, unreachable)."""


class SparkDiedError(WeirError, RuntimeError):
    """Spark's JVM died under the driver (killed, out of memory): the run stops; a new driver recovers."""


class NotDurableWarning(UserWarning):
    """State kept for one run only (Storm's in-memory providers on Spark local mode): lost on restart."""
