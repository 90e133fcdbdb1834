"""Flux YAML: Storm's schema builds a weir topology; every mistake is one error naming file, line and component.

The end-to-end test runs tests/flux/wordcount.yaml (an include, ``--filter`` properties, an
``${ENV-...}`` variable, a component with constructorArgs / properties / configMethods passed by
``ref``, Storm's Redis state provider class name) on Spark against a real Redis, exactly.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from weir.cli.main import build_parser
from weir.flux import FluxError, load_flux
from weir.topology import GroupingKind

HERE = Path(__file__).resolve().parent
FLUX = str(HERE / "wordcount.yaml")


def _write(tmp_path: Path, text: str, name: str = "t.yaml") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return str(p)


def _props(tmp_path: Path, port: int, input_dir: str) -> str:
    p = tmp_path / "dev.properties"
    p.write_text(f"# test properties\nredis.port={port}\ninput.dir = {input_dir}\n")
    return str(p)


def test_the_file_becomes_the_topology_with_its_includes_filters_and_components(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLUX_STATE_DIR", str(tmp_path / "state"))
    flux = load_flux(FLUX, filter_file=_props(tmp_path, 6399, str(tmp_path / "in")), env_filter=True)
    assert flux.name == "flux-wordcount"  # the including file wins (override: false)
    assert flux.conf["topology.state.checkpoint.interval.ms"] == 500  # from the include
    assert flux.conf["weir.state.dir"] == str(tmp_path / "state")  # ${ENV-FLUX_STATE_DIR}
    assert '"port": 6399' in flux.conf["topology.state.provider.config"]  # ${redis.port}
    comps = flux.topology.components
    assert comps["lines"].obj.path == str(tmp_path / "in")  # type: ignore[attr-defined]
    splitter = comps["split"].obj.splitter  # type: ignore[attr-defined]
    assert (splitter.separator, splitter.lower, splitter.stop_words) == (None, True, {"the", "a"})
    assert comps["count"].obj.min_length == 2  # type: ignore[attr-defined]
    assert comps["split"].parallelism == 2
    sub = comps["count"].inputs[0]
    assert (sub.source, sub.stream, sub.grouping.kind, sub.grouping.fields) == (
        "split", "default", GroupingKind.FIELDS, ("word",)
    )  # fmt: skip


GOOD_HEAD = """
name: t
spouts:
  - id: lines
    className: weir.sources.FileSpout
    constructorArgs: ["/tmp/in"]
"""


@pytest.mark.parametrize(
    ("body", "line", "match"),
    [
        ("name: t\nspouts: [\n", 3, r"not valid YAML"),
        (
            GOOD_HEAD + "bolts:\n  - id: split\n    className: tests.flux.flux_components.Nope\n",
            8,
            r"\(split\): className 'tests.flux.flux_components.Nope': no such Python class",
        ),
        (
            GOOD_HEAD + "bolts:\n  - id: split\n    className: org.apache.storm.starter.SplitSentence\n",
            8,
            r"\(split\): className 'org.apache.storm.starter.SplitSentence': no such Python class \(a Java class",
        ),
        (
            GOOD_HEAD + "bolts:\n  - id: split\n    className: tests.flux.flux_components.SplitBolt\n"
            "    constructorArgs:\n      - ref: splitter\n",
            10,
            r"\(split\): ref 'splitter' names no component",
        ),
        (
            GOOD_HEAD + "bolts:\n  - id: c\n    className: tests.flux.flux_components.CountBolt\n"
            "streams:\n  - from: lines\n    to: count\n    grouping: {type: SHUFFLE}\n",
            11,
            r"\(stream lines --> count\): to: 'count' names no spout or bolt \(defined: c, lines\)",
        ),
        (
            GOOD_HEAD + "bolts:\n  - id: c\n    className: tests.flux.flux_components.CountBolt\n"
            "streams:\n  - from: lines\n    to: c\n    grouping: {type: PARTIAL_KEY}\n",
            12,
            r"grouping type 'PARTIAL_KEY' is not one of SHUFFLE, FIELDS",
        ),
        (
            GOOD_HEAD + "bolts:\n  - id: c\n    className: tests.flux.flux_components.NotAComponent\n",
            8,
            r"\(c\): NotAComponent is not a bolt",
        ),
        (
            GOOD_HEAD + "bolts:\n  - id: c\n    className: tests.flux.flux_components.CountBolt\n"
            "    configMethods:\n      - name: withNothing\n",
            10,
            r"\(c\): CountBolt has no public method 'withNothing'",
        ),
        (
            GOOD_HEAD + "bolts:\n  - id: c\n    className: tests.flux.flux_components.CountBolt\n    parallelism: 0\n",
            9,
            r"\(c\): parallelism must be an integer >= 1",
        ),
        (
            GOOD_HEAD + "bolts:\n  - id: c\n    className: tests.flux.flux_components.CountBolt\n",
            7,
            r"\(c\): .*bolt 'c' has no inputs",
        ),
        ("name: t\nconfig:\n  x: ${ENV-WEIR_FLUX_UNSET_VARIABLE}\n", 3, r"WEIR_FLUX_UNSET_VARIABLE, which is not set"),
        ("name: t\nincludes:\n  - resource: true\n    file: x.yaml\n", 3, r"resource: true names a Java classpath"),
        ("name: t\nspouts:\n  - id: a\n    className: os.system\n", 4, r"className 'os.system': no such Python class"),
    ],
)
def test_a_mistake_is_one_error_naming_the_file_the_line_and_the_component(
    tmp_path: Path, body: str, line: int, match: str
) -> None:
    path = _write(tmp_path, body)
    with pytest.raises(FluxError, match=match) as info:
        load_flux(path, env_filter=True)
    assert str(info.value).startswith(f"Flux {path}:{line}"), str(info.value)


def test_an_error_in_an_included_file_names_that_file(tmp_path: Path) -> None:
    _write(tmp_path, "spouts:\n  - id: s\n    className: no.such.Spout\n", "inc.yaml")
    path = _write(tmp_path, "name: t\nincludes:\n  - file: inc.yaml\n")
    with pytest.raises(FluxError, match=r"className 'no.such.Spout'") as info:
        load_flux(path)
    assert str(info.value).startswith(f"Flux {tmp_path / 'inc.yaml'}:3 (s)")


def test_storm_s_kafka_spout_classes_map_onto_weir_s_kafka_spout(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        name: kafka
        components:
          - id: builder
            className: "org.apache.storm.kafka.spout.KafkaSpoutConfig$Builder"
            constructorArgs: ["127.0.0.1:9092", ["words"]]
            configMethods:
              - name: setProp
                args: ["group.id", "flux"]
              - name: setFirstPollOffsetStrategy
                args: ["LATEST"]
          - id: config
            className: org.apache.storm.kafka.spout.KafkaSpoutConfig
            constructorArgs: [{ref: builder}]
          - id: splitter
            className: tests.flux.flux_components.Splitter
        spouts:
          - id: kafka
            className: org.apache.storm.kafka.spout.KafkaSpout
            constructorArgs: [{ref: config}]
        bolts:
          - id: split
            className: tests.flux.flux_components.SplitBolt
            constructorArgs: [{ref: splitter}]
        streams:
          - from: kafka
            to: split
            grouping: {type: LOCAL_OR_SHUFFLE}
    """,
    )
    from weir.sources import KafkaSpout

    spout = load_flux(path).topology.components["kafka"].obj
    assert isinstance(spout, KafkaSpout)
    assert spout.topics == ["words"] and spout.start == "latest"


def test_weir_run_takes_flux_s_options() -> None:
    args = build_parser().parse_args(["run", "topology.yaml", "--filter", "dev.properties", "--env-filter"])
    assert (args.target, args.filter, args.env_filter) == ("topology.yaml", "dev.properties", True)


@pytest.mark.spark
@pytest.mark.services
def test_the_flux_word_count_is_exact_on_spark(
    spark: Any, redis_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    indir = tmp_path / "in"
    indir.mkdir()
    lines = ["The quick brown fox", "a fox and THE dog", "dog eat dog", "x y z quick"]
    (indir / "part-0.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("FLUX_STATE_DIR", str(tmp_path / "state"))
    flux = load_flux(FLUX, filter_file=_props(tmp_path, redis_server.port, str(indir)), env_filter=True)
    weir.submit(flux.name, flux.conf, flux.topology, spark).process_available()
    expected = Counter(w.lower() for line in lines for w in line.split() if w.lower() not in ("the", "a"))
    expected = Counter({w: n for w, n in expected.items() if len(w) >= 2})
    from weir.state.factory import StateFactory

    provider = StateFactory.from_url(f"redis://127.0.0.1:{redis_server.port}/0")
    got: Counter[str] = Counter()
    for i in range(2):
        for k, v in provider.new_state(f"flux-wordcount-count-{i}"):
            got[k] += int(v)
    assert got == expected


def test_a_flux_file_may_name_streamparse_components(tmp_path: Path) -> None:
    from weir.streamparse import StreamparseBolt, StreamparseSpout, StreamparseStatefulBolt

    path = _write(
        tmp_path,
        """
        name: sp
        spouts:
          - id: lines
            className: tests.streamparse_compat._topology.LineSpout
        bolts:
          - id: split
            className: tests.streamparse_compat._topology.SplitBolt
            parallelism: 2
          - id: count
            className: tests.streamparse_compat._topology.WordCountBolt
        streams:
          - {from: lines, to: split, grouping: {type: SHUFFLE}}
          - {from: split, to: count, grouping: {type: FIELDS, args: [word]}}
    """,
    )
    comps = load_flux(path).topology.components
    assert isinstance(comps["lines"].obj, StreamparseSpout) and comps["lines"].outputs["default"].to_list() == ["line"]
    split = comps["split"].obj
    assert isinstance(split, StreamparseBolt) and split.inputs == {"lines": {"default": ("line",)}}
    assert sorted(comps["split"].outputs) == ["default", "lengths"]
    assert isinstance(comps["count"].obj, StreamparseStatefulBolt) and comps["count"].is_stateful
