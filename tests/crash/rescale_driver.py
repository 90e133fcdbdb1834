"""The submit-time rescale alone, as a process the crash tests SIGKILL (see WEIR_CRASH_AT).

Usage: python rescale_driver.py URL TOPOLOGY COMPONENT PARALLELISM [windowed]

Starts the coordinator of ``TOPOLOGY`` exactly as ``weir.submit`` does for a Storm topology whose
stateful bolt ``COMPONENT`` (fields grouping on its key) now has ``PARALLELISM`` tasks: a
:class:`~weir.checkpoint.rescale.Rescaler` re-partitions (or finishes re-partitioning) its state.
No Spark: the step under test runs on the driver before any batch. With ``windowed`` the bolt is an
event-time windowed bolt grouped on its tuples' first field: its window namespaces move too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from weir.checkpoint.coordinator import CheckpointStore, Coordinator, Participants
from weir.checkpoint.rescale import ComponentRoute, Rescaler, hash_route
from weir.state import StateFactory


class _NoParticipants(Participants):
    def commit_all(self, txid: int, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """Nothing to commit: only the start is under test."""

    def rollback_all(self, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """Nothing to roll back."""


def main() -> int:
    url, topology, component, parallelism = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    backend = StateFactory.from_url(url).backend
    window_key = (lambda ev: ev[5][0]) if sys.argv[5:] == ["windowed"] else None
    route = ComponentRoute(component, route=hash_route(), window_key=window_key)
    rescaler = Rescaler(topology, {component: route})
    coord = Coordinator(
        topology, CheckpointStore(backend, topology), _NoParticipants(), {component: parallelism}, rescaler=rescaler
    )
    epoch = coord.start()
    assert coord.record is not None
    print(f"DONE epoch={epoch} parallelism={dict(coord.record.parallelism)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
