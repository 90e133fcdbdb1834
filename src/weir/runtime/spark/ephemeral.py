"""Run-scoped stores: Storm's in-memory state on Spark local mode.

Storm's ``InMemoryKeyValueState`` (``topology.state.provider = memory``) and Trident's
``MemoryMapState.Factory()`` keep state in the worker's memory: it lives as long as the topology
runs and is gone after a restart. Spark runs tasks in separate Python worker processes, so a dict
in one process cannot hold it. In local mode weir gives such state a **run-scoped store** instead:
a SQLite file in a temporary directory created at submit time and deleted when the driver process
exits. Every worker of the machine sees it (the same semantics as Storm's in-memory state during
the run), nothing survives the run (the same semantics after it), and a :class:`NotDurableWarning`
says so. A cluster master is refused at submit time: executors on other machines cannot share a
local file, and the state would silently split.
"""

from __future__ import annotations

import atexit
import logging
import re
import shutil
import tempfile
import warnings

from weir.errors import ConfigError, NotDurableWarning

__all__ = ["refuse_on_cluster", "run_scoped_dir", "warn_not_durable"]

log = logging.getLogger("weir.runtime")


def refuse_on_cluster(topology: str, what: str, master: str) -> None:
    """Raise :class:`ConfigError` when ``master`` is not local: in-memory state needs one machine."""
    if master.startswith("local"):
        return
    msg = (
        f"topology {topology!r}: {what} keeps state in memory for the run, which weir provides on Spark "
        f"local mode only (a run-scoped store on this machine); Spark master {master!r} runs executors on "
        "other machines, which cannot share it. Use a durable store (redis, postgres; for Trident a "
        "RedisMapState / PostgresMapState / MemcachedMapState factory)"
    )
    raise ConfigError(msg)


def run_scoped_dir(topology: str) -> str:
    """A new temporary directory for this run's in-memory state, deleted when the process exits."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", topology)[:40]
    path = tempfile.mkdtemp(prefix=f"weir-run-{safe}-")
    atexit.register(shutil.rmtree, path, True)
    return path


def warn_not_durable(topology: str, what: str, path: str) -> None:
    """Warn (``NotDurableWarning``, and the log) that ``what`` lives only as long as this run."""
    text = (
        f"topology {topology!r}: {what} is not durable: its state lives for this run only, in a run-scoped "
        f"store under {path}, and is lost when the driver stops or restarts (as in Storm). Use a durable "
        "store to keep state across restarts"
    )
    log.warning("%s", text)
    warnings.warn(text, NotDurableWarning, stacklevel=4)
