"""weir: Storm, Trident and IBM Streams state management in Python, on Spark Structured Streaming."""

from collections.abc import Mapping
from typing import Any

from weir.errors import (
    CheckpointError,
    ConfigError,
    FencedError,
    SerializationError,
    SourceError,
    StateError,
    StateLossError,
    TopologyError,
    WeirError,
)

__version__ = "0.1.0"


def submit(name: str, conf: Mapping[str, Any], topology: Any, spark: Any = None) -> Any:
    """Submit a topology (Storm ``TopologyBuilder`` or ``TridentTopology``) to Spark.

    Everything is validated now; returns a :class:`~weir.runtime.spark.runner.TopologyRun` whose
    ``start()`` runs it continuously and ``process_available()`` processes what is there and stops.
    """
    from weir.runtime.spark import submit as _submit

    return _submit(name, conf, topology, spark)


__all__ = [
    "CheckpointError",
    "ConfigError",
    "FencedError",
    "SerializationError",
    "SourceError",
    "StateError",
    "StateLossError",
    "TopologyError",
    "WeirError",
    "__version__",
    "submit",
]
