"""The Spark Structured Streaming runtime: one streaming query per topology, the coordinator per batch."""

from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.runner import RunStatus, TopologyRun
from weir.runtime.spark.submit import submit, submit_topology

__all__ = ["RunStatus", "RuntimeConfig", "TopologyRun", "submit", "submit_topology"]
