"""The Spark Structured Streaming runtime: one streaming query per topology, the coordinator per batch.

The names below are loaded on first use (PEP 562), and with them the built-in dialects: a Python
worker that unpickles a stage function of ``weir.runtime.spark.<dialect>.tasks`` imports this
package too, and must not pay for the whole driver-side runtime (over Spark Connect every streaming
query's session starts its own Python workers, so this is paid once per query there).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weir.runtime.spark.config import RuntimeConfig
    from weir.runtime.spark.dialect import BatchRunner, Dialect, Prepared, register_dialect, submit
    from weir.runtime.spark.runner import RunStatus, TopologyRun

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

_WHERE = {
    "BatchRunner": "weir.runtime.spark.dialect",
    "Dialect": "weir.runtime.spark.dialect",
    "Prepared": "weir.runtime.spark.dialect",
    "register_dialect": "weir.runtime.spark.dialect",
    "submit": "weir.runtime.spark.dialect",
    "RunStatus": "weir.runtime.spark.runner",
    "TopologyRun": "weir.runtime.spark.runner",
    "RuntimeConfig": "weir.runtime.spark.config",
}


def _register_builtin_dialects() -> None:
    # the built-in dialects register themselves (this package's __init__ is the only place that names them)
    from weir.runtime.spark.storm import submit as _storm  # noqa: F401
    from weir.runtime.spark.trident import runner as _trident  # noqa: F401


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    _register_builtin_dialects()
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value
