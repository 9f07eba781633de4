"""CacheKey: canonical hashing of named components, and diff() rendering."""

import json

import pytest
from cache_fakes import BASE, make_key, run_python

from qnb.cache import COMPONENTS, CacheKey, canonical_json, diff
from qnb.cache.key import ABSENT, Difference


def test_components_kept_in_full_and_in_order():
    key = make_key()
    assert tuple(key.components) == COMPONENTS
    assert key.components == BASE
    assert tuple(key.component_digests) == COMPONENTS
    assert all(len(d) == 64 for d in key.component_digests.values())
    assert len(key.digest) == 64 and key.short == key.digest[:12]


def test_missing_or_unknown_component_is_refused():
    components = dict(BASE)
    del components["captured"]
    with pytest.raises(ValueError, match="missing: captured"):
        CacheKey(components)
    with pytest.raises(ValueError, match="unknown: extra"):
        CacheKey({**BASE, "extra": 1})


@pytest.mark.parametrize(
    "values",
    [
        (1, 1.0, True),  # raw JSON scalars
        (0, 0.0, -0.0, False, None, "0"),
        (["bool", True], ["int", 1], ["float", "0x1p+0"], ["str", "1"]),
        (["dtype", "f16"], ["dtype", "f32"], "f16"),
        (1.0, 1.0000000000000002),  # floats are written exactly
    ],
)
def test_distinct_values_never_collide(values):
    digests = {make_key(captured={"x": value}).digest for value in values}
    assert len(digests) == len(values)


def test_dict_order_does_not_matter_and_tuples_equal_lists():
    a = make_key(captured={"a": ["int", 1], "b": ["bool", True]})
    b = make_key(captured={"b": ["bool", True], "a": ["int", 1]})
    assert a.digest == b.digest
    assert (
        make_key(captured={"t": ("tuple", (1, 2))}).digest
        == make_key(captured={"t": ["tuple", [1, 2]]}).digest
    )


def test_canonical_json_refuses_what_json_would_conflate():
    with pytest.raises(TypeError, match="non-string key"):
        canonical_json({1: "a"})
    with pytest.raises(TypeError, match="not JSON data"):
        canonical_json({"x": object()})
    with pytest.raises(TypeError):
        make_key(captured={"x": {1, 2}})


def test_canonical_json_round_trips_exactly():
    value = {
        "f": [0.1, 1e300, -0.0, 5e-324],
        "s": 'λ\n"',
        "n": None,
        "b": [True, False],
        "i": 2**70,
    }
    text = canonical_json(value)
    assert canonical_json(json.loads(text)) == text
    assert text.isascii()


def test_digest_is_the_same_in_every_process():
    # str hashing is salted per process; a key must not depend on it.
    code = (
        "from cache_fakes import make_key; print(make_key(captured_x=['float', '0x1.8p+1']).digest)"
    )
    seen = {
        run_python(code, env={"PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2", "random")
    }
    assert seen == {make_key(captured_x=["float", "0x1.8p+1"]).digest}


def test_every_component_changes_the_digest():
    base = make_key()
    for name in COMPONENTS:
        changed = make_key(**{name: {"changed": True}})
        assert changed.digest != base.digest
        assert [d.component for d in diff(base, changed)] == [name] * len(diff(base, changed))
        assert changed.component_digests[name] != base.component_digests[name]
        assert all(
            changed.component_digests[o] == base.component_digests[o]
            for o in COMPONENTS
            if o != name
        )


def test_diff_reports_each_entry_of_dict_components():
    old = make_key(captured={"use_alias": ["bool", False], "gone": ["int", 3]})
    new = make_key(captured={"use_alias": ["bool", True], "added": ["dtype", "f16"]})
    differences = diff(old, new)
    assert [(d.component, d.name) for d in differences] == [
        ("captured", "added"),
        ("captured", "gone"),
        ("captured", "use_alias"),
    ]
    rendered = [str(d) for d in differences]
    assert rendered == [
        "captured.added: <absent> → f16",
        "captured.gone: 3 → <absent>",
        "captured.use_alias: False → True",
    ]
    assert differences[0].old is ABSENT


def test_diff_accepts_component_dicts_and_is_empty_for_equal_keys():
    assert diff(make_key(), make_key()) == []
    assert diff(make_key().components, make_key(captured_x=["int", 2])) == [
        Difference("captured", "x", ABSENT, ["int", 2])
    ]


def test_diff_of_non_dict_component_is_one_difference():
    old = make_key(qnb="0.1.0")
    new = make_key(qnb="0.2.0")
    assert [str(d) for d in diff(old, new)] == ["qnb: 0.1.0 → 0.2.0"]


@pytest.mark.parametrize(
    "old, new, text",
    [
        (["bool", False], ["bool", True], "False → True"),
        (["dtype", "f32"], ["dtype", "f16"], "f32 → f16"),
        (["int", 16], ["int", 32], "16 → 32"),
        (["float", "0x1p+0"], ["float", "0x1.8p+1"], "1.0 → 3.0"),
        (["str", "a"], ["str", "b"], "'a' → 'b'"),
        (["none"], ["tuple", [["int", 1], ["bool", True]]], "None → (1, True)"),
        (
            ["enum", "pkg.mod.Mode.FAST", ["int", 1], "enum"],
            ["numpy-dtype", "float32"],
            "<Mode.FAST: 1> → float32",
        ),
        (  # a named tuple as Python writes it, not its tagged form
            ["namedtuple", "m.Cfg", ["scale", "bias"], [["float", "0x1p+1"], ["bool", True]]],
            ["namedtuple", "m.Cfg", ["scale", "bias"], [["float", "0x1.8p+1"], ["bool", True]]],
            "Cfg(scale=2.0, bias=True) → Cfg(scale=3.0, bias=True)",
        ),
        (  # two forms that read alike are told apart (the module of the enum)
            ["enum", "a.Mode.FAST", ["int", 1], "enum"],
            ["enum", "b.Mode.FAST", ["int", 1], "enum"],
            "<a.Mode.FAST: 1> → <b.Mode.FAST: 1>",
        ),
        (["float", "-0x0p+0"], ["float", "0x0p+0"], "-0.0 → 0.0"),
        (["str", "0x1p+1"], ["float", "0x1p+1"], "'0x1p+1' → 2.0"),
    ],
)
def test_tagged_values_render_readably(old, new, text):
    (difference,) = diff(make_key(captured_v=old), make_key(captured_v=new))
    assert str(difference) == f"captured.v: {text}"


def test_source_difference_shows_the_first_changed_line_not_the_text():
    old_text = "def helper(x):\n    y = x + 1\n    return y * 2\n" + "# padding\n" * 50
    new_text = old_text.replace("x + 1", "x - 1")
    (difference,) = diff(
        make_key(source={"helper": old_text}), make_key(source={"helper": new_text})
    )
    assert str(difference) == "source.helper: text changed at line 2: 'y = x + 1' → 'y = x - 1'"
    added = diff(make_key(source={}), make_key(source={"helper": old_text}))
    assert str(added[0]) == "source.helper: <absent> → text of 53 lines"


def test_signature_values_render_as_dicts():
    old = make_key(signature={"a": {"kind": "array", "dtype": "f32", "ndim": 2}})
    new = make_key(signature={"a": {"kind": "array", "dtype": "f16", "ndim": 2}})
    assert [str(d) for d in diff(old, new)] == [
        "signature.a: {dtype: f32, kind: array, ndim: 2} → {dtype: f16, kind: array, ndim: 2}"
    ]


def test_diff_lists_components_in_key_order_and_a_components_name_first():
    """A backend switch reads ``backend.name: wgpu → cpu`` first, not the adapter details
    that follow from it (which sort before "name")."""
    wgpu = {"name": "wgpu", "adapter": "llvmpipe", "driver": "Mesa", "features": ["shader-f16"]}
    old = make_key(
        qnb={"version": "0.1.0", "cache_schema": 1},
        backend=wgpu,
        compiler={"wgpu-native": "29"},
        options={"debug": False},
    )
    new = make_key(
        qnb={"version": "0.2.0", "cache_schema": 1},
        captured_use_alias=["bool", True],
        backend={"name": "cpu", "adapter": "host"},
        compiler={"numpy": "2.4"},
        options={"debug": True},
    )
    assert [d.label for d in diff(old, new)] == [
        "qnb.version",
        "captured.use_alias",
        "backend.name",
        "backend.adapter",
        "backend.driver",
        "backend.features",
        "compiler.numpy",
        "compiler.wgpu-native",
        "options.debug",
    ]
