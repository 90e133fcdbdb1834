r"""The build-time check of seed 004's table: which spout types and state types are exactly-once.

=====================  ===================  ==================  ==================
spout \\ state          non-transactional    transactional       opaque
=====================  ===================  ==================  ==================
transactional          no                   exactly-once        exactly-once
opaque                 no                   no                  exactly-once
non-transactional      no                   no                  no
=====================  ===================  ==================  ==================

Every state a topology writes (``persistent_aggregate``, ``partition_persist``) is checked against
every spout it reads from, when the topology is submitted. An inexact pair raises a
:class:`~weir.errors.TopologyError` that prints this table, unless the topology opts out with
``conf["weir.trident.allow.inexact"] = True`` or the call passed ``allow_inexact=True``. A state
factory that declares no ``state_type`` (a user's own ``State``) cannot be checked and is accepted,
except behind a non-transactional spout, which nothing makes exactly-once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from weir._util import flag
from weir.errors import ConfigError, TopologyError
from weir.topology.components import Guarantee, Spout
from weir.trident.nodes import STATE_KINDS, Node
from weir.trident.state.base import StateType, is_exactly_once

__all__ = ["ALLOW_INEXACT", "TABLE", "allow_inexact", "check", "spout_type"]

log = logging.getLogger("weir.trident")

ALLOW_INEXACT = "weir.trident.allow.inexact"

TABLE = """\
  spout \\ state      non-transactional  transactional  opaque
  transactional      no                 exactly-once   exactly-once
  opaque             no                 no             exactly-once
  non-transactional  no                 no             no"""


def allow_inexact(conf: Mapping[str, Any]) -> bool:
    """``conf["weir.trident.allow.inexact"]`` as a bool (``True``/``"true"``/``1``)."""
    return flag(conf.get(ALLOW_INEXACT, False), ALLOW_INEXACT)


def spout_type(spout: Any) -> StateType:
    """The spout's ``guarantee`` as a :class:`StateType` (transactional when it declares none).

    A Storm spout (``next_tuple``/``ack``/``fail``) is non-transactional in Storm: a replay emits
    whatever the source redelivers. On weir its batches come from the spout log, so a batch replays
    exactly the tuples it had, and a redelivered message id is not emitted again: it is
    transactional, whatever it declares: exactly-once with transactional and opaque states, never
    with a non-transactional one.
    """
    if isinstance(spout, Spout) and spout.is_storm_spout():
        return StateType.TRANSACTIONAL
    g = spout.guarantee if isinstance(spout, Spout) else None
    if g is None:
        return StateType.TRANSACTIONAL
    value = g.value if isinstance(g, Guarantee) else g
    try:
        return StateType.parse(value)
    except ConfigError as exc:
        msg = f"spout {type(spout).__name__}: unknown guarantee {g!r}; use weir.sources.Guarantee"
        raise TopologyError(msg) from exc


def _label(t: StateType | None) -> str:
    return "undeclared" if t is None else t.name.lower().replace("_", "-")


def _problem(spout: Node, sink: Node, state_type: StateType | None) -> str | None:
    st = spout_type(spout.params["spout"])
    if state_type is None:
        if st is StateType.NON_TRANSACTIONAL:
            return f"spout {spout.name!r} is non-transactional"
        return None
    if is_exactly_once(st, state_type):
        return None
    what = _label(st)
    if isinstance(spout.params["spout"], Spout) and spout.params["spout"].is_storm_spout():
        what += " (a Storm spout, non-transactional in Storm; weir replays its batches from the spout log)"
    return f"spout {spout.name!r} is {what} and the state is {_label(state_type)}"


class Plan(Protocol):
    """What :func:`check` reads of a topology: its plan (a ``TridentTopology``)."""

    @property
    def nodes(self) -> list[Node]:
        """Every operation, in creation order."""
        ...


def check(topology: Plan, conf: Mapping[str, Any], *, inexact_allowed: bool | None = None) -> list[str]:
    """Check every written state; raise on an inexact pair unless opted out (returns the warnings).

    ``inexact_allowed`` is the opt-out already parsed from ``conf`` (by the runtime's configuration);
    ``None`` reads it from ``conf``.

    Raises
    ------
    TopologyError
        For the first state that cannot be exactly-once, with the table and the ways out.
    """
    global_ok = allow_inexact(conf) if inexact_allowed is None else inexact_allowed
    warnings: list[str] = []
    for node in topology.nodes:
        if node.kind not in STATE_KINDS:
            continue
        state = node.params["state"]
        problems = [p for s in node.spouts() if (p := _problem(s, node, state.state_type)) is not None]
        if not problems:
            continue
        text = f"state {state.state_id!r} ({node.kind}, {state.factory!r}) cannot be exactly-once: " + "; ".join(
            problems
        )
        if global_ok or node.params.get("allow_inexact"):
            log.warning("%s (allowed by %s)", text, ALLOW_INEXACT if global_ok else "allow_inexact=True")
            warnings.append(text)
            continue
        msg = (
            f"{text}.\nWhich spout and state types give exactly-once updates (Trident's table):\n{TABLE}\n"
            "Use an opaque state (e.g. a factory's .opaque()) — it is exactly-once with transactional and "
            "opaque spouts — or a transactional spout; or accept at-least-once updates with "
            f"conf[{ALLOW_INEXACT!r}] = True or allow_inexact=True on this call."
        )
        raise TopologyError(msg, component=node.name)
    return warnings
