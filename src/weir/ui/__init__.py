"""``weir ui``: a read-only web page of a topology, live or from its store after the fact.

Shows the topology graph (components, groupings, parallelism, stateful ones marked), throughput per
component, the checkpoint timeline (batch and commit time per txid, failures and recoveries marked),
state namespaces with their key counts and the last errors with their tracebacks. Everything is read
from the store the coordinator writes (see :mod:`weir.checkpoint.history`); nothing is ever written.
"""

from weir.ui.app import UiServer, create_app
from weir.ui.data import Snapshot, StoreReader

__all__ = ["Snapshot", "StoreReader", "UiServer", "create_app"]
