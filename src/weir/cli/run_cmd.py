"""``weir run FILE_OR_MODULE[:attr]``: submit a topology with a live progress display."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

from weir.cli._conf import expand_env, read_conf_file
from weir.cli._progress import Progress
from weir.cli._table import print_table
from weir.errors import ConfigError

__all__ = ["build_conf", "load_target", "parse_conf_pairs", "register"]

_ATTRS = ("topology", "TOPOLOGY", "create_topology", "build_topology", "build", "builder")


def parse_conf_pairs(pairs: list[str]) -> dict[str, Any]:
    """``k=v`` pairs; values are parsed as JSON when they are JSON (numbers, objects), else strings."""
    conf: dict[str, Any] = {}
    for p in pairs:
        if "=" not in p:
            msg = f"--conf {p!r}: expected KEY=VALUE"
            raise ConfigError(msg)
        k, v = p.split("=", 1)
        try:
            conf[k.strip()] = json.loads(v)
        except ValueError:
            conf[k.strip()] = v
    return conf


def build_conf(
    module_conf: Mapping[str, Any],
    conf_files: list[str],
    pairs: list[str],
    master: str | None = None,
    remote: str | None = None,
) -> dict[str, Any]:
    """The run's configuration: the module's ``CONF``, each ``--conf-file``, ``--conf``, ``--master``.

    ``remote`` (``--remote``) makes the run a Spark Connect client: it sets ``weir.spark.remote`` and
    drops a ``weir.spark.master`` from the other sources.

    Later sources win; ``${NAME}`` in string values is replaced by the environment variable ``NAME``.
    """
    conf = dict(module_conf)
    for path in conf_files:
        conf.update(read_conf_file(path))
    conf.update(parse_conf_pairs(pairs))
    if master:
        conf["weir.spark.master"] = master
    if remote:
        conf.pop("weir.spark.master", None)
        conf["weir.spark.remote"] = remote
    return dict(expand_env(conf))


def _import_target(spec: str) -> tuple[Any, str]:
    path, _, attr = spec.partition(":")
    if path.endswith(".py") or os.path.sep in path:
        if not os.path.exists(path):
            msg = f"weir run: no such file {path!r}"
            raise ConfigError(msg)
        name = os.path.splitext(os.path.basename(path))[0]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        mspec = importlib.util.spec_from_file_location(name, path)
        assert mspec is not None and mspec.loader is not None
        module = importlib.util.module_from_spec(mspec)
        sys.modules[name] = module
        try:
            mspec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise ConfigError(_load_error(path, exc)) from exc
        _ship_by_value(os.path.dirname(os.path.abspath(path)))
    else:
        try:
            module = importlib.import_module(path)
        except ModuleNotFoundError as exc:
            msg = f"weir run: cannot import module {path!r}: {exc}"
            raise ConfigError(msg) from exc
        except Exception as exc:
            raise ConfigError(_load_error(path, exc)) from exc
        name = path.rsplit(".", 1)[-1]
    return (module, attr), name


def _load_error(path: str, exc: BaseException) -> str:
    """One line saying where loading a topology file failed (``file:line: SyntaxError: ...``)."""
    if isinstance(exc, SyntaxError):
        where = f"{exc.filename or path}:{exc.lineno}" if exc.lineno else path
        return f"weir run: {where}: {type(exc).__name__}: {exc.msg}"
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f"{path}:{line}" if line else path
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"weir run: {where}: {type(exc).__name__}: {text}".rstrip(": ")


def _ship_by_value(directory: str) -> None:
    """Pickle the classes of modules loaded from ``directory`` by value.

    Executors cannot import a module that was loaded from a file path on the driver, so its bolts
    travel with their code instead (cloudpickle's pickle-by-value).
    """
    from pyspark import cloudpickle

    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and os.path.dirname(os.path.abspath(f)) == directory:
            cloudpickle.register_pickle_by_value(mod)


def load_target(spec: str, conf: Mapping[str, Any] | None = None) -> tuple[Any, str, Mapping[str, Any]]:
    """Find the topology in ``spec``: (topology, default name, module CONF).

    A function that builds the topology is called with the configuration (module ``CONF`` updated
    with ``conf``, i.e. ``--conf``) when it takes a ``conf`` argument, so ``--conf input=DIR`` reaches it.
    """
    import inspect

    from weir.streamparse import is_streamparse_topology
    from weir.topology import Topology, TopologyBuilder
    from weir.trident import TridentTopology

    (module, attr), name = _import_target(spec)
    attrs = [attr] if attr else [a for a in _ATTRS if hasattr(module, a)]
    if not attrs:
        attrs = _streamparse_topologies(module, spec)
    if not attrs or not hasattr(module, attrs[0]):
        msg = (
            f"weir run: {spec!r} has no {attr or 'topology'}; name it FILE:attr, or define one of "
            f"{', '.join(_ATTRS)} (a topology, a TopologyBuilder, a TridentTopology or a function returning one)"
        )
        raise ConfigError(msg)
    obj = getattr(module, attrs[0])
    if is_streamparse_topology(obj):  # a streamparse.Topology subclass: weir.submit takes the class
        return obj, str(getattr(module, "NAME", name)), dict(getattr(module, "CONF", {}) or {})
    if callable(obj) and not isinstance(obj, (Topology, TopologyBuilder, TridentTopology)):
        module_conf = dict(getattr(module, "CONF", {}) or {})
        merged = {**module_conf, **dict(conf or {})}
        try:
            takes_conf = "conf" in inspect.signature(obj).parameters
        except (TypeError, ValueError):
            takes_conf = False
        obj = obj(conf=merged) if takes_conf else obj()
    if isinstance(obj, TopologyBuilder):
        obj = obj.create_topology()
    conf = dict(getattr(module, "CONF", {}) or {})
    return obj, str(getattr(module, "NAME", name)), conf


def _streamparse_topologies(module: Any, spec: str) -> list[str]:
    """The ``streamparse.Topology`` subclass defined in ``module`` (none, or one; two is an error)."""
    from weir.streamparse import is_streamparse_topology

    found = [
        k
        for k, v in vars(module).items()
        if is_streamparse_topology(v) and getattr(v, "__module__", None) == module.__name__
    ]
    if len(found) > 1:
        msg = f"weir run: {spec!r} defines several streamparse topologies ({', '.join(found)}); name one as FILE:Class"
        raise ConfigError(msg)
    return found


def _cmd_run(args: argparse.Namespace) -> int:
    from weir.runtime.spark.session import stop_spark

    try:
        return _run_topology(args)
    finally:
        if "pyspark" in sys.modules:
            stop_spark()  # the command owns the Spark it started: leave no JVM behind


def _run_topology(args: argparse.Namespace) -> int:
    import weir

    # --conf-file and --conf reach a topology function with a ``conf`` parameter as well as the run
    overrides = build_conf({}, args.conf_file or [], args.conf or [], args.master, args.remote)
    module_conf: Mapping[str, Any]
    if args.target.endswith((".yaml", ".yml")):  # a Flux file; its classes may live next to it
        from weir.flux import load_flux

        here = os.path.dirname(os.path.abspath(args.target))
        sys.path.insert(0, here)
        flux = load_flux(args.target, filter_file=args.filter, env_filter=args.env_filter)
        _ship_by_value(here)
        topology, default_name, module_conf = flux.topology, flux.name, flux.conf
    else:
        if args.filter or args.env_filter:
            msg = "weir run: --filter and --env-filter apply to a Flux file (topology.yaml)"
            raise ConfigError(msg)
        topology, default_name, module_conf = load_target(args.target, overrides)
    conf = build_conf(module_conf, args.conf_file or [], args.conf or [], args.master, args.remote)
    if args.accept_state_loss:
        conf["weir.accept.state.loss"] = True
    name = args.name or default_name
    run = weir.submit(name, conf, topology)
    print(f"weir: running topology {name!r} (Ctrl-C stops it after the batch in flight)", file=sys.stderr)
    interrupted = _StopOnInterrupt(run)
    with interrupted, Progress(run, interval=args.interval):
        run.start(available_now=args.available_now, final=args.final)
        try:
            run.await_termination(args.timeout)
        finally:
            run.stop()
    st = run.status()
    rows = [(c, v["in"], v["out"], v["failed"]) for c, v in st.components.items()]
    if rows:
        print_table(["component", "tuples in", "tuples out", "failed"], rows)
    txid = "none yet" if st.last_txid is None else st.last_txid
    restarts = f", {st.restarts} restarts after transient failures" if st.restarts else ""
    print(f"last txid {txid}, {st.batches} batches, {st.tuples_in} tuples from spouts{restarts}")
    return 130 if interrupted.count else 0


class _StopOnInterrupt:
    """Ctrl-C while a topology runs: one line, stop at the batch boundary; a second Ctrl-C stops now.

    Replaces PySpark's SIGINT handler (which cancels every running job, failing the batch in
    flight) for the time the topology runs.
    """

    def __init__(self, run: Any) -> None:
        self.run = run
        self.count = 0
        self._previous: Any = None

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count == 1:
            print(
                "\nweir: interrupted; stopping after the batch in flight commits (Ctrl-C again to stop now)",
                file=sys.stderr,
            )
            self.run.request_stop()
        else:
            threading.Thread(target=self.run.stop, daemon=True).start()

    def __enter__(self) -> _StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def register(subparsers: Any) -> None:
    """Add ``weir run``."""
    p = subparsers.add_parser("run", help="run a topology on Spark with a live progress display")
    p.add_argument(
        "target",
        metavar="FILE_OR_MODULE[:attr]",
        help="where the topology is defined: a Python file or module (a topology, a builder, a function or a "
        "streamparse.Topology subclass), or a Flux file (topology.yaml)",
    )
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="configuration (repeatable)")
    p.add_argument(
        "--conf-file",
        action="append",
        metavar="FILE",
        help="a JSON object of configuration keys (repeatable; --conf overrides it); ${NAME} in any "
        "value is replaced by the environment variable NAME, so passwords stay out of argv",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--master", help="Spark master URL (weir.spark.master), default local[*]")
    where.add_argument(
        "--remote",
        metavar="URL",
        help="run as a client of a Spark Connect server, e.g. sc://127.0.0.1:15002 (weir.spark.remote)",
    )
    p.add_argument("--name", help="topology name (default: NAME in the module, else its file name)")
    p.add_argument("--available-now", action="store_true", help="process what the sources have now, then stop")
    p.add_argument(
        "--final",
        action="store_true",
        help="with --available-now: the input is finite; end the run with a final mark (IBM Streams punctuation)",
    )
    p.add_argument(
        "--accept-state-loss",
        action="store_true",
        help="start even if the store and Spark's checkpoint disagree (the store lost committed state, or the "
        "checkpoint is missing and the spouts cannot resume from the store); the lost updates stay lost, or "
        "the sources are read again (weir.accept.state.loss)",
    )
    p.add_argument(
        "--filter",
        metavar="PROPS",
        help="a Flux file only: a .properties file whose keys replace ${key} in the file (Flux's --filter)",
    )
    p.add_argument(
        "--env-filter",
        action="store_true",
        help="a Flux file only: replace ${ENV-NAME} with the environment variable NAME (Flux's --env-filter)",
    )
    p.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--interval", type=float, default=0.5, help="progress refresh in seconds")
    p.set_defaults(func=_cmd_run)
