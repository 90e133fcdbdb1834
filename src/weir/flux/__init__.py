"""Flux YAML topologies on weir: ``weir run topology.yaml [--filter props.properties] [--env-filter]``.

Apache Storm's Flux schema — ``name``, ``config``, ``components`` (``constructorArgs``,
``properties``, ``configMethods``, ``ref`` / ``reflist``), ``spouts`` and ``bolts`` (``id``,
``className``, ``parallelism``, ...), ``streams`` (``from``, ``to``, ``grouping`` with ``type``,
``args``, ``streamId``), ``includes``, ``${ENV-NAME}`` and property substitution — with Python
classes by dotted path in ``className`` (and the Storm class names :mod:`weir.flux._storm` maps).
Every problem is one :class:`FluxError` at load time naming the file, the line and the component.
Needs ``weir[flux]`` (ruamel.yaml). See docs/moving-from-storm.md, "Flux YAML".
"""

from __future__ import annotations

from collections.abc import Mapping

from weir.flux._build import FluxTopology, build
from weir.flux._storm import STORM_CLASSES
from weir.flux._yaml import FluxError, read_flux, read_properties

__all__ = ["STORM_CLASSES", "FluxError", "FluxTopology", "load_flux"]


def load_flux(path: str, *, filter_file: str | None = None, env_filter: bool = False,
              properties: Mapping[str, str] | None = None) -> FluxTopology:  # fmt: skip
    """Read the Flux file ``path`` and build its topology (``name``, ``conf``, ``topology``).

    ``filter_file`` is Flux's ``--filter`` (a ``.properties`` file whose keys replace ``${key}``),
    ``properties`` more of them (they win), ``env_filter`` Flux's ``--env-filter`` (``${ENV-NAME}``).
    """
    props = dict(read_properties(filter_file)) if filter_file else {}
    props.update(properties or {})
    doc, files = read_flux(path, props, env_filter)
    return build(doc, files, path)
