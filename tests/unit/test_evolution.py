"""Schema-evolution rules: every allowed change passes, every other one names the rule and both types."""

from __future__ import annotations

import pytest

from weir.errors import ConfigError
from weir.state.evolution import Encoding, EvolutionError, check_change, conforms, parse_type

REC = {"record": {"n": "int", "tag": "str"}}


def enc(value_type: object = "any", vser: str = "json", ktype: object = "any") -> Encoding:
    return Encoding("json", vser, ktype, parse_type(value_type, "t"))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("int", "int"),
        ("int", "float"),
        ("str", "any"),
        (REC, {"record": {"n": "float", "tag": "str"}}),
        (REC, {"record": {"n": "int", "tag": "str", "seen": {"type": "int", "default": 0}}}),
        (REC, "any"),
    ],
)
def test_allowed_changes(old: object, new: object) -> None:
    check_change(enc(old), enc(new), "here")


@pytest.mark.parametrize(
    ("old", "new", "rule", "shown"),
    [
        ("float", "int", "V2", "from float to int"),
        ("int", "str", "V2", "from int to str"),
        ("any", "int", "V2", "from any to int"),
        (REC, {"record": {"n": "int"}}, "R2", "lose field 'tag'"),
        (REC, {"record": {"n": "int", "tag": "str", "seen": "int"}}, "R1", "'seen' without a default"),
        (REC, {"record": {"n": "str", "tag": "str"}}, "V2", "the value.n"),
        ("int", REC, "R3", "a scalar and a record"),
    ],
)
def test_refused_changes_name_the_rule_and_both_types(old: object, new: object, rule: str, shown: str) -> None:
    with pytest.raises(EvolutionError, match=rf"topology 'T', component 'c'.*rule {rule}") as info:
        check_change(enc(old), enc(new), "topology 'T', component 'c'")
    assert shown in str(info.value)
    assert "stored with" in str(info.value) and "now" in str(info.value)


def test_serializer_and_key_type_changes_are_refused() -> None:
    with pytest.raises(EvolutionError, match=r"rule S1: the value serializer may not change \(json -> msgpack\)"):
        check_change(enc(vser="json"), enc(vser="msgpack"), "x")
    with pytest.raises(EvolutionError, match=r"rule K1"):
        check_change(enc(ktype="str"), enc(ktype="int"), "x")


def test_type_specs_and_values() -> None:
    assert parse_type('{"record": {"a": "int"}}', "w") == {"record": {"a": {"type": "int"}}}
    with pytest.raises(ConfigError, match=r"w: unknown type 'long'"):
        parse_type("long", "w")
    spec = parse_type(REC, "w")
    assert conforms({"n": 1, "tag": "x", "extra": 2}, spec)
    assert not conforms({"n": "1", "tag": "x"}, spec)
    assert conforms(3, "float") and not conforms(True, "int") and not conforms(1.5, "int")
