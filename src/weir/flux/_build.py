"""Building a topology from a Flux definition: components, spouts, bolts and streams.

Only what the file names runs: each ``className`` (a Python class by dotted path, or a Storm class
name weir maps, see :mod:`weir.flux._storm`) is imported and its constructor called with the
``constructorArgs``; ``properties`` set attributes (through a ``set_<name>`` / ``set<Name>`` setter
when the class has one, as Flux prefers setters); ``configMethods`` call public methods by name.
``ref`` / ``reflist`` arguments are the components defined under ``components``. Nothing is
evaluated: no expression, no ``factory`` of arbitrary callables other than a class's own methods.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir._util import positive_int
from weir.errors import TopologyError
from weir.flux._storm import STORM_CLASSES
from weir.flux._yaml import FluxError, Where, line_of
from weir.topology.builder import BoltDeclarer, Topology, TopologyBuilder
from weir.topology.components import Component, Spout
from weir.topology.tuple import DEFAULT_STREAM

__all__ = ["FluxTopology", "build"]

_GROUPINGS = ("SHUFFLE", "FIELDS", "ALL", "GLOBAL", "NONE", "LOCAL_OR_SHUFFLE", "DIRECT")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*$")  # a property or a config method: public names only
_PATH_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")  # a module or class name in className


@dataclass
class FluxTopology:
    """A Flux file made ready to submit: its ``name``, its ``config`` and the built topology."""

    name: str
    conf: dict[str, Any]
    topology: Topology


class _Builder:
    def __init__(self, doc: Mapping[str, Any], files: Mapping[int, str], path: str) -> None:
        self.doc = doc
        self.files = files
        self.path = path
        self.defs: dict[str, Mapping[str, Any]] = {}
        self.made: dict[str, Any] = {}
        self.making: list[str] = []

    def where(self, node: Any, component: str | None, key: Any = None) -> Where:
        return Where(self.files.get(id(node), self.path), line_of(node, key), component)

    # ---- classes and instances ---------------------------------------------------------------
    def resolve(self, node: Mapping[str, Any], cid: str) -> Any:
        name = node.get("className")
        if not isinstance(name, str) or not name:
            msg = "className is missing (a Python class by dotted path)"
            raise self.where(node, cid).error(msg)
        target = STORM_CLASSES.get(name, name)
        module_name, _, attr = target.rpartition(".")
        if not module_name or not all(_PATH_PART.match(p) for p in target.split(".")):
            msg = f"className {name!r} is not a dotted path to a class (package.module.Class)"
            raise self.where(node, cid, "className").error(msg)
        obj: Any = None
        # the longest importable module prefix, then attributes (nested classes)
        parts = target.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            try:
                for p in parts[cut:]:
                    obj = getattr(obj, p)
            except AttributeError:
                obj = None
            break
        if name in STORM_CLASSES and callable(obj):
            return obj  # type: ignore[no-any-return]  # a Storm class weir maps (possibly onto a factory)
        if not isinstance(obj, type):
            hint = (
                " (a Java class: rewrite it in Python, see docs/moving-from-storm.md)"
                if name.startswith(("org.apache.", "com.", "org."))
                else ""
            )
            msg = f"className {name!r}: no such Python class{hint}"
            raise self.where(node, cid, "className").error(msg)
        return obj

    def value(self, v: Any, cid: str, node: Any) -> Any:
        if isinstance(v, Mapping) and set(v) == {"ref"}:
            return self.ref(str(v["ref"]), cid, node)
        if isinstance(v, Mapping) and set(v) == {"reflist"}:
            refs = v["reflist"]
            if not isinstance(refs, list):
                msg = "reflist must be a list of component ids"
                raise self.where(v, cid).error(msg)
            return [self.ref(str(r), cid, v) for r in refs]
        if isinstance(v, Mapping):
            return {str(k): self.value(x, cid, v) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x, cid, v) for x in v]
        return v

    def ref(self, rid: str, cid: str, node: Any) -> Any:
        if rid in self.made:
            return self.made[rid]
        if rid not in self.defs:
            known = ", ".join(sorted(self.defs)) or "none"
            msg = f"ref {rid!r} names no component (components defined: {known})"
            raise self.where(node, cid).error(msg)
        if rid in self.making:
            msg = f"components refer to each other in a cycle: {' -> '.join([*self.making, rid])}"
            raise self.where(self.defs[rid], rid).error(msg)
        self.making.append(rid)
        try:
            self.made[rid] = self.instance(self.defs[rid], rid)
        finally:
            self.making.pop()
        return self.made[rid]

    def instance(self, node: Mapping[str, Any], cid: str) -> Any:
        cls = self.resolve(node, cid)
        adapted = _streamparse_component(cls, cid, node)
        if adapted is not None:
            return adapted
        args = node.get("constructorArgs") or []
        if not isinstance(args, list):
            msg = "constructorArgs must be a list"
            raise self.where(node, cid, "constructorArgs").error(msg)
        values = [self.value(a, cid, args) for a in args]
        try:
            obj = cls(*values)
        except Exception as exc:
            msg = f"{cls.__qualname__}({', '.join(repr(v)[:60] for v in values)}) raised {type(exc).__name__}: {exc}"
            raise self.where(node, cid, "className").error(msg) from exc
        self.properties(obj, node, cid)
        self.config_methods(obj, node, cid)
        return obj

    def properties(self, obj: Any, node: Mapping[str, Any], cid: str) -> None:
        props = node.get("properties") or []
        if not isinstance(props, list):
            msg = "properties must be a list of {name: ..., value|ref: ...}"
            raise self.where(node, cid, "properties").error(msg)
        for i, p in enumerate(props):
            where = self.where(props, cid, i)
            if not isinstance(p, Mapping) or not isinstance(p.get("name"), str) or not _NAME.match(p["name"]):
                msg = "a property is {name: NAME, value: ...} or {name: NAME, ref: ID}"
                raise where.error(msg)
            name = p["name"]
            val = self.ref(str(p["ref"]), cid, p) if "ref" in p else self.value(p.get("value"), cid, p)
            setter = _method(obj, "set_" + _snake(name)) or _method(obj, "set" + name[0].upper() + name[1:])
            try:
                if setter is not None:
                    setter(val)
                else:
                    setattr(obj, name, val)
            except Exception as exc:
                msg = f"property {name!r} could not be set: {type(exc).__name__}: {exc}"
                raise where.error(msg) from exc

    def config_methods(self, obj: Any, node: Mapping[str, Any], cid: str) -> None:
        calls = node.get("configMethods") or []
        if not isinstance(calls, list):
            msg = "configMethods must be a list of {name: ..., args: [...]}"
            raise self.where(node, cid, "configMethods").error(msg)
        for i, c in enumerate(calls):
            where = self.where(calls, cid, i)
            if not isinstance(c, Mapping) or not isinstance(c.get("name"), str) or not _NAME.match(c["name"]):
                msg = "a config method is {name: METHOD, args: [...]} (a public method of the class)"
                raise where.error(msg)
            name = c["name"]
            fn = _method(obj, name) or _method(obj, _snake(name))
            if fn is None:
                msg = f"{type(obj).__qualname__} has no public method {name!r} (nor {_snake(name)!r})"
                raise where.error(msg)
            args = c.get("args") or []
            if not isinstance(args, list):
                msg = "args must be a list"
                raise where.error(msg)
            try:
                fn(*[self.value(a, cid, args) for a in args])
            except Exception as exc:
                msg = f"{name}(...) raised {type(exc).__name__}: {exc}"
                raise where.error(msg) from exc

    # ---- the topology ------------------------------------------------------------------------
    def build(self) -> FluxTopology:
        doc = self.doc
        name = doc.get("name")
        if not isinstance(name, str) or not name:
            msg = "the topology has no name (name: my-topology)"
            raise Where(self.path, line_of(doc)).error(msg)
        if doc.get("topologySource") is not None:
            msg = "topologySource (a Java class that builds the topology) cannot run on weir; define spouts and bolts"
            raise Where(self.path, line_of(doc, "topologySource")).error(msg)
        conf = doc.get("config") or {}
        if not isinstance(conf, Mapping):
            msg = "config must be a mapping of configuration keys"
            raise Where(self.path, line_of(doc, "config")).error(msg)
        for d in self._list("components"):
            cid = self._id(d, "component")
            if cid in self.defs:
                msg = f"component id {cid!r} is defined twice"
                raise self.where(d, cid, "id").error(msg)
            self.defs[cid] = d
        b = TopologyBuilder()
        declarers: dict[str, BoltDeclarer] = {}
        ids: set[str] = set()
        for section, kind in (("spouts", "spout"), ("bolts", "bolt")):
            for d in self._list(section):
                cid = self._id(d, kind)
                if cid in ids:
                    msg = f"{kind} id {cid!r} is used twice"
                    raise self.where(d, cid, "id").error(msg)
                ids.add(cid)
                obj = self.instance(d, cid)
                at = self.where(d, cid, "parallelism")
                par = positive_int(d.get("parallelism", 1), "parallelism", error=at.error, expected="an integer >= 1")
                if kind == "spout":
                    if not isinstance(obj, Spout):
                        msg = f"{type(obj).__qualname__} is not a spout (a weir.topology.Spout or weir.sources spout)"
                        raise self.where(d, cid, "className").error(msg)
                    self._guard(d, cid, b.set_spout, cid, obj, par)
                else:
                    if not isinstance(obj, Component) or not obj.is_bolt():
                        msg = f"{type(obj).__qualname__} is not a bolt (Bolt, BasicBolt, StatefulBolt or Operator)"
                        raise self.where(d, cid, "className").error(msg)
                    declarers[cid] = self._guard(d, cid, b.set_bolt, cid, obj, par)
        for i, s in enumerate(self._list("streams")):
            self._stream(s, i, declarers, ids)
        try:
            topology = b.create_topology()
            _streamparse_inputs(topology)
        except TopologyError as exc:
            node = self._node_of(exc.component) if getattr(exc, "component", None) else None
            where = self.where(node, exc.component) if node is not None else Where(self.path)
            raise where.error(str(exc)) from exc
        return FluxTopology(name, dict(conf), topology)

    def _node_of(self, cid: Any) -> Any:
        for section in ("spouts", "bolts"):
            for d in self._list(section):
                if d.get("id") == cid:
                    return d
        return None

    def _guard(self, node: Any, cid: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except TopologyError as exc:
            raise self.where(node, cid).error(str(exc)) from exc

    def _list(self, key: str) -> list[Any]:
        v = self.doc.get(key) or []
        if not isinstance(v, list):
            msg = f"{key} must be a list"
            raise Where(self.path, line_of(self.doc, key)).error(msg)
        for item in v:
            if not isinstance(item, Mapping):
                msg = f"every entry of {key} is a mapping, got {item!r:.60}"
                raise self.where(v, key).error(msg)
        return v

    def _id(self, d: Mapping[str, Any], kind: str) -> str:
        cid = d.get("id")
        if not isinstance(cid, str) or not cid:
            msg = f"a {kind} needs an id"
            raise self.where(d, None).error(msg)
        return cid

    def _stream(self, s: Mapping[str, Any], i: int, declarers: Mapping[str, BoltDeclarer], ids: set[str]) -> None:
        label = str(s.get("name") or f"stream {s.get('from')} --> {s.get('to')}")
        src, dst = s.get("from"), s.get("to")
        for key, cid in (("from", src), ("to", dst)):
            if not isinstance(cid, str) or cid not in ids:
                known = ", ".join(sorted(ids)) or "none"
                msg = f"{key}: {cid!r} names no spout or bolt (defined: {known})"
                raise self.where(s, label, key).error(msg)
        assert isinstance(src, str) and isinstance(dst, str)
        if dst not in declarers:
            msg = f"to: {dst!r} is a spout; a stream goes to a bolt"
            raise self.where(s, label, "to").error(msg)
        g = s.get("grouping")
        if not isinstance(g, Mapping):
            msg = "grouping is missing ({type: SHUFFLE|FIELDS|..., args, streamId})"
            raise self.where(s, label).error(msg)
        gtype = str(g.get("type", "")).upper()
        stream = str(g.get("streamId") or DEFAULT_STREAM)
        decl = declarers[dst]
        where = self.where(g, label, "type")
        if gtype not in _GROUPINGS:
            extra = " (CUSTOM groupings are Java classes weir cannot run)" if gtype == "CUSTOM" else ""
            msg = f"grouping type {g.get('type')!r} is not one of {', '.join(_GROUPINGS)}{extra}"
            raise where.error(msg)
        args = g.get("args")
        try:
            if gtype == "FIELDS":
                if not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args):
                    msg = "a FIELDS grouping needs args: [field, ...]"
                    raise where.error(msg)
                decl.fields_grouping(src, stream, list(args))
            elif gtype == "SHUFFLE":
                decl.shuffle_grouping(src, stream)
            elif gtype == "ALL":
                decl.all_grouping(src, stream)
            elif gtype == "GLOBAL":
                decl.global_grouping(src, stream)
            elif gtype == "NONE":
                decl.none_grouping(src, stream)
            elif gtype == "LOCAL_OR_SHUFFLE":
                decl.local_or_shuffle_grouping(src, stream)
            else:
                decl.direct_grouping(src, stream)
        except TopologyError as exc:
            raise where.error(str(exc)) from exc


def _streamparse_component(cls: Any, cid: str, node: Mapping[str, Any]) -> Any:
    """A streamparse ``Bolt`` / ``Spout`` class named in ``className``: its weir adapter (None for other classes).

    Its streams are the class's ``outputs``; it is created in its task, as under ``weir.submit``.
    """
    import sys

    pystorm = sys.modules.get("pystorm")
    if pystorm is None or not isinstance(cls, type) or not issubclass(cls, pystorm.component.Component):
        return None
    from weir.streamparse import StreamparseBolt, StreamparseSpout, StreamparseStatefulBolt

    outputs: dict[str, tuple[list[str], bool]] = {}
    declared = getattr(cls, "outputs", None) or []
    for out in declared:
        if isinstance(out, str):
            outputs.setdefault("default", ([], False))[0].append(out)
        else:  # a streamparse Stream
            outputs[str(out.name)] = (list(out.fields), bool(out.direct))
    if issubclass(cls, pystorm.spout.Spout):
        return StreamparseSpout(cls, cid, outputs, {})
    kind = StreamparseStatefulBolt if callable(getattr(cls, "init_state", None)) else StreamparseBolt
    return kind(cls, cid, outputs, {}, {})


def _streamparse_inputs(topology: Topology) -> None:
    """Tell each streamparse bolt the fields of its inputs (its tuples' ``values`` are namedtuples of them)."""
    from weir.streamparse import StreamparseBolt

    for spec in topology.components.values():
        if isinstance(spec.obj, StreamparseBolt):
            for sub in spec.inputs:
                fields = tuple(topology.components[sub.source].outputs[sub.stream])
                spec.obj.inputs.setdefault(sub.source, {})[sub.stream] = fields


def _method(obj: Any, name: str) -> Any:
    if name.startswith("_"):
        return None
    fn = getattr(obj, name, None)
    return fn if callable(fn) and not isinstance(fn, type) else None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def build(doc: Mapping[str, Any], files: Mapping[int, str], path: str) -> FluxTopology:
    """The topology a Flux definition (already read and merged) describes; a :class:`FluxError` if it cannot."""
    try:
        return _Builder(doc, files, path).build()
    except FluxError:
        raise
