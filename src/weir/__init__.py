"""weir: Storm, Trident and IBM Streams state management in Python, on Spark Structured Streaming."""

from weir.errors import (
    CheckpointError,
    ConfigError,
    FencedError,
    SerializationError,
    SourceError,
    StateError,
    TopologyError,
    WeirError,
)

__version__ = "0.1.0"

__all__ = [
    "CheckpointError",
    "ConfigError",
    "FencedError",
    "SerializationError",
    "SourceError",
    "StateError",
    "TopologyError",
    "WeirError",
    "__version__",
]
