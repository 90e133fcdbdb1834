"""How weir calls a bolt's ``execute``: the call shape, checked at submit time."""

from __future__ import annotations

import inspect
from typing import Any, Literal

from weir.errors import TopologyError
from weir.topology.components import BasicBolt
from weir.topology.windowing import WindowedBolt

__all__ = ["ExecuteShape", "execute_shape"]

ExecuteShape = Literal["rich", "basic"]


def execute_shape(component: Any, cid: str = "?") -> ExecuteShape:
    """How weir calls ``component.execute``: ``"rich"`` = ``execute(tup)``, ``"basic"`` = ``execute(tup, collector)``.

    A :class:`BasicBolt` is always basic; a :class:`Bolt` is basic when its ``execute`` requires a
    second argument. Raises :class:`~weir.errors.TopologyError` (at submit time) when the signature
    cannot be called either way.
    """
    execute = getattr(component, "execute", None)
    if not callable(execute):
        msg = f"component {cid!r}: {type(component).__name__} has no execute method"
        raise TopologyError(msg, component=cid)
    try:
        sig = inspect.signature(execute)
    except (TypeError, ValueError):  # a builtin or C callable: trust the class
        return "basic" if isinstance(component, BasicBolt) else "rich"
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    var = any(p.kind is p.VAR_POSITIONAL for p in params)
    kw_required = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]

    def can_take(n: int) -> bool:
        return not kw_required and len(required) <= n and (var or len(positional) >= n)

    if isinstance(component, WindowedBolt):
        shapes = [("rich", 1)]
        wanted = "execute(self, window) (a TupleWindow)"
    elif isinstance(component, BasicBolt):
        shapes = [("basic", 2)]
        wanted = "execute(self, tup, collector) (a BasicBolt gets a BasicOutputCollector)"
    else:
        shapes = [("rich", 1), ("basic", 2)]
        wanted = (
            "execute(self, tup) (ack or fail each tuple with self.collector) or "
            "execute(self, tup, collector) (a BasicOutputCollector; tuples acked automatically)"
        )
    for shape, n in shapes:
        if can_take(n):
            return shape  # type: ignore[return-value]
    plain = sig.replace(parameters=[p.replace(annotation=p.empty) for p in params], return_annotation=sig.empty)
    msg = f"component {cid!r}: {type(component).__name__}.execute{plain} cannot be called by weir; write {wanted}"
    raise TopologyError(msg, component=cid)
