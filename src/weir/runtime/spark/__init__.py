"""The Spark Structured Streaming runtime: one streaming query per topology, the coordinator per batch."""

from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.dialect import BatchRunner, Dialect, Prepared, register_dialect, submit
from weir.runtime.spark.runner import RunStatus, TopologyRun

# the built-in dialects register themselves (this package's __init__ is the only place that names them)
from weir.runtime.spark.storm import submit as _storm  # noqa: F401
from weir.runtime.spark.trident import runner as _trident  # noqa: F401

__all__ = [
    "BatchRunner",
    "Dialect",
    "Prepared",
    "RunStatus",
    "RuntimeConfig",
    "TopologyRun",
    "register_dialect",
    "submit",
]
