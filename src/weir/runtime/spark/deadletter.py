"""Dead-letter sinks: where failed tuples land, written before the batch commits (idempotent)."""

from __future__ import annotations

import json
import os
from typing import Any

from weir.errors import ConfigError
from weir.state.base import StateProvider

__all__ = ["DeadLetterSink", "make_sink"]


class DeadLetterSink:
    """Writes one batch's failed tuples; a replay of the batch overwrites the same entries."""

    def write(self, txid: int, records: list[dict[str, Any]]) -> None:  # pragma: no cover - interface
        """Store ``records`` of ``txid`` durably."""
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        """Where the records go."""
        raise NotImplementedError


class DirectorySink(DeadLetterSink):
    """``<dir>/<topology>/txid-<n>.jsonl``, written atomically (temp file + rename)."""

    def __init__(self, root: str, topology: str) -> None:
        self.dir = os.path.join(root, topology)

    def write(self, txid: int, records: list[dict[str, Any]]) -> None:
        """One JSON object per line."""
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, f"txid-{txid:012d}.jsonl")
        tmp = path + f".tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, default=repr, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def describe(self) -> str:
        """The directory."""
        return self.dir


class NamespaceSink(DeadLetterSink):
    """Keys ``<txid>:<n>`` in a provider namespace (default ``<topology>-$deadletter``)."""

    def __init__(self, provider: StateProvider, namespace: str) -> None:
        self.provider = provider
        self.namespace = namespace

    def write(self, txid: int, records: list[dict[str, Any]]) -> None:
        """Direct write of every record (idempotent keys)."""
        state: Any = self.provider.new_state(self.namespace, {})
        for i, r in enumerate(records):
            state.put(f"{txid:012d}:{i:06d}", json.loads(json.dumps(r, default=repr)))
        state.commit()

    def describe(self) -> str:
        """The namespace."""
        return f"namespace {self.namespace!r}"


def make_sink(spec: str, topology: str, provider: StateProvider | None) -> DeadLetterSink:
    """Parse ``weir.deadletter``: a directory path, ``state`` or ``namespace:NAME``."""
    if spec == "state" or spec.startswith("namespace:"):
        if provider is None:
            msg = "weir.deadletter='state' needs a state provider (the topology has no stateful component)"
            raise ConfigError(msg)
        ns = spec.split(":", 1)[1] if ":" in spec else f"{topology}-$deadletter"
        if not ns:
            msg = "weir.deadletter='namespace:' needs a namespace name"
            raise ConfigError(msg)
        return NamespaceSink(provider, ns)
    return DirectorySink(spec, topology)
