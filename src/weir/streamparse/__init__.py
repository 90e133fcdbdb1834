"""streamparse topologies on weir: a ``streamparse.Topology`` subclass runs unchanged, in-process.

``weir.submit(name, conf, WordCount)`` and ``weir run topologies/wordcount.py`` accept a subclass of
``streamparse.Topology`` (install ``weir[streamparse]``); its Python bolts and spouts run in weir's
tasks through the adapters of :mod:`weir.streamparse._components`. A bolt keeps weir state by
defining ``init_state(state)`` — :class:`WithState` does it and keeps ``self.state``. See
docs/moving-from-storm.md, "streamparse topologies".
"""

from weir.streamparse._components import StreamparseBolt, StreamparseSpout, StreamparseStatefulBolt, WithState
from weir.streamparse._topology import ENVIRONMENT_KEY, is_streamparse_topology, to_topology, topology_conf

__all__ = [
    "ENVIRONMENT_KEY",
    "StreamparseBolt",
    "StreamparseSpout",
    "StreamparseStatefulBolt",
    "WithState",
    "is_streamparse_topology",
    "to_topology",
    "topology_conf",
]
