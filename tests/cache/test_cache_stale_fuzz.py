"""A stale-kernel fuzzer: no launch ever gives another answer than a fresh compile.

Each case is a generated kernel that reads compile-time values through random paths: globals,
closures, a module passed to a func, bound to a local name or given by ``qnb.static``, a class
reached through a module, a func reached as ``m.h(...)``, an enum member's property and an
attribute set on it, a named tuple's field names, a module rebound under a captured name,
Template values, ``qnb.static`` expressions and branches on a read value; configuration
objects (dataclasses frozen and not, namespaces, objects nested in objects, class attributes,
an object passed to a func or bound to a local name, an enum class iterated or counted,
directly and through a module); and values of str, int, float and tuple subclasses whose
``repr``, ``==`` and ``hash`` lie (and whose arithmetic, ``len`` or indexing is their own),
captured and as Template values. The values come from a small domain, so the warm cache
soon holds entries for many combinations.

A batch of cases runs in a fresh process with one set of values, then in more fresh processes
with other sets, all on one cache directory. Every launch from the cache is compared with a
fresh compile (``QNB_ALWAYS_COMPILE=1``) of the same kernel in the same process; then each
process changes the mutable objects' attributes in place (and replaces nested objects) to a
second value set and compares every case again, so the launch memo and its hot entry are
checked against mutation too.

Short by default; ``QNB_STALE_FUZZ_CASES=10000`` (and ``QNB_STALE_FUZZ_SEED``,
``QNB_STALE_FUZZ_PER_BATCH``: cases per process) for a long run.
"""

from __future__ import annotations

import json
import os
import random
import textwrap

from cache_fakes import run_python

CASES = int(os.environ.get("QNB_STALE_FUZZ_CASES", "24"))
SEED = int(os.environ.get("QNB_STALE_FUZZ_SEED", "1"))
PER_BATCH = int(os.environ.get("QNB_STALE_FUZZ_PER_BATCH", "24"))
ROUNDS = 3  # value sets per batch, each in its own fresh process
NUMBERS = (1.0, 2.0, 3.0)

KINDS = (
    "global", "closure", "module_arg", "module_local", "module_static", "class",
    "func_via_module", "enum_property", "enum_attribute", "named_tuple", "template",
    "static_expression", "branch", "rebound_module",
    # configuration objects
    "frozen_dataclass", "dataclass", "namespace", "nested_object", "object_to_func",
    "namespace_to_func",
    "object_local", "class_attribute", "enum_iteration", "enum_class_via_module",
    # subclasses of the constant types whose repr, == and hash lie
    "str_subclass", "int_subclass", "float_subclass", "tuple_subclass", "subclass_template",
)  # fmt: skip

# The classes a batch's cases build their values from (in ``fz_kernels``).
PRELUDE = """
@dataclasses.dataclass(frozen=True)
class Frozen:
    v: float

@dataclasses.dataclass
class Block:
    v: float

@dataclasses.dataclass
class Outer:
    block: Block
    label: str = "outer"

from tests.lying_values import LyingFloat, LyingInt, LyingStr, LyingTuple

MUTATIONS = []

def mutate():
    W = json.load(open(os.environ["FZ_MUTATED"]))
    for change in MUTATIONS:
        change(W)
"""


# What each kind of slot must store, as Python computes it from the value set ``V`` (and,
# after ``mutate()``, ``W`` for the kinds it changes): a second oracle beside the fresh
# compile, for a key that conflates two values (a fresh compile would agree with the
# cache, both computing from the conflated form). A subclass computes as its plain value.
EXPECTED = {
    "global": "V[s]", "closure": "V[s]", "module_arg": "V[s]", "module_local": "V[s]",
    "module_static": "V[s] * 2.0", "class": "V[s]", "func_via_module": "1.5 * V[s]",
    "enum_property": "V[s]", "enum_attribute": "V[s] + 0.5",
    "named_tuple": "1.0 if V[s] == 'ab' else 2.0", "template": "V[s]",
    "static_expression": "(V[s] + 1.0) * 2.0 + V[s]",
    "branch": "1.0 if V[s] > 1.5 else -1.0",
    "rebound_module": "10.0 if V[s] == 'a' else 20.0",
    "frozen_dataclass": "V[s]", "dataclass": "W[s] * 3.0", "namespace": "W[s]",
    "nested_object": "W[s] + 0.5", "object_to_func": "W[s] * 2.0", "namespace_to_func": "W[s] + 1.0", "object_local": "W[s]",
    "class_attribute": "W[s]",
    "enum_iteration": "1 + int(V[s]) + 1 + (10 if V[s] > 2.5 else 0)",
    "enum_class_via_module": "3.0 if V[s] > 2.5 else 2.0",
    "str_subclass": "float(int(V[s]))", "int_subclass": "int(V[s]) + 1",
    "float_subclass": "V[s] * 2.0", "tuple_subclass": "V[s] + 2",
    "subclass_template": "float(int(V[s]))",
}  # fmt: skip


# A subclass's value, and what the case computes with it (NAME stands for it).
SUBCLASSES = {
    "str_subclass": ("LyingStr('a' * int(V[s]))", "qnb.static(float(len(NAME)))"),
    "int_subclass": ("LyingInt(int(V[s]))", "qnb.static(NAME + 1)"),
    "float_subclass": ("LyingFloat(V[s])", "NAME * 2.0"),
    "tuple_subclass": ("LyingTuple((V[s], 1.0))", "qnb.static(NAME[0] + len(NAME))"),
}


def domain(kind):
    if kind == "named_tuple":
        return ("ab", "ba")
    if kind == "rebound_module":
        return ("a", "b")
    return NUMBERS


class Batch:
    """The generated modules of one batch: ``fz_cfg`` and ``fz_cfg2`` (modules the kernels
    reach) and ``fz_kernels`` (the cases); every value is read from ``V``, the value set."""

    def __init__(self, rng: random.Random, count: int):
        self.slots: dict[str, str] = {}  # slot -> kind
        self.cfg = ["import json, os", "import qnb", 'V = json.load(open(os.environ["FZ_VALUES"]))']
        self.cfg2 = ["import qnb"]
        self.top = [
            "import dataclasses, enum, json, os, types, typing",
            "import qnb",
            "import fz_cfg, fz_cfg2",
            'V = json.load(open(os.environ["FZ_VALUES"]))',
            *PRELUDE.splitlines(),
        ]
        self.cases = []
        for case in range(count):
            self.cases.append(self.case(rng, case))

    def case(self, rng, case):
        kinds = [rng.choice(KINDS) for _ in range(rng.randint(1, 4))]
        closure, body, templates = [], [], []
        for j, kind in enumerate(kinds):
            s = f"c{case}_{j}"
            self.slots[s] = kind
            body.extend(self.slot(kind, s, j, closure, templates))
        params = "x: qnb.Array[qnb.f32, 1]" + (", t: qnb.Template" if templates else "")
        lines = [f"def make_{case}():", *([f"    {c}" for c in closure] or ["    pass"])]
        lines += ["    @qnb.kernel", f"    def k{case}({params}):"]
        lines += [f"        {b}" for b in body]
        lines += [f"    return k{case}", f"K{case} = make_{case}()"]
        lines.append(f"T{case} = ({''.join(f'{t}, ' for t in templates)})")
        self.top.extend(lines)
        expected = [
            EXPECTED[k].replace("[s]", f"[{f'c{case}_{j}'!r}]") for j, k in enumerate(kinds)
        ]
        return {
            "name": f"k{case}",
            "slots": len(kinds),
            "template": bool(templates),
            "kinds": kinds,
            "expected": expected,
        }

    def slot(self, kind, s, j, closure, templates):
        store = f"x[{j}] = "
        if kind == "global":
            self.top.append(f"G_{s} = V[{s!r}]")
            return [store + f"G_{s}"]
        if kind == "closure":
            closure.append(f"C_{s} = V[{s!r}]")
            return [store + f"C_{s}"]
        if kind == "module_arg":
            self.cfg.append(f"A_{s} = V[{s!r}]")
            self.top += ["@qnb.func", f"def get_{s}(m):", f"    return m.A_{s}"]
            return [store + f"get_{s}(fz_cfg)"]
        if kind == "module_local":
            self.cfg.append(f"A_{s} = V[{s!r}]")
            return [f"m_{s} = fz_cfg", store + f"m_{s}.A_{s}"]
        if kind == "module_static":
            self.cfg.append(f"A_{s} = V[{s!r}]")
            return [f"c_{s} = qnb.static(fz_cfg)", store + f"qnb.static(c_{s}.A_{s} * 2.0)"]
        if kind == "class":
            self.cfg += [f"class Box_{s}:", f"    N = V[{s!r}]"]
            self.top += ["@qnb.func", f"def box_{s}(m):", f"    return m.Box_{s}.N"]
            return [store + f"box_{s}(fz_cfg)"]
        if kind == "func_via_module":
            self.cfg += [
                f"F_{s} = V[{s!r}]",
                "@qnb.func",
                f"def h_{s}(v):",
                f"    return v * F_{s}",
            ]
            self.top += ["@qnb.func", f"def call_{s}(m):", f"    return m.h_{s}(1.5)"]
            return [store + f"call_{s}(fz_cfg)"]
        if kind in ("enum_property", "enum_attribute"):
            self.top += [
                f"class E_{s}(enum.Enum):",
                "    A = 1",
                "    B = 2",
                "    @property",
                "    def weight(self):",
                f"        return V[{s!r}] * self.value",
                f"E_{s}.A.extra = V[{s!r}] + 0.5",
            ]
            attr = "weight" if kind == "enum_property" else "extra"
            return [f"e_{s} = E_{s}.A", store + f"qnb.static(e_{s}.{attr})"]
        if kind == "named_tuple":
            self.top += [
                f"if V[{s!r}] == 'ab':",
                f"    class P_{s}(typing.NamedTuple):",
                "        a: float",
                "        b: float",
                "else:",
                f"    class P_{s}(typing.NamedTuple):",
                "        b: float",
                "        a: float",
                f"PT_{s} = P_{s}(1.0, 2.0)",
            ]
            return [store + f"qnb.static(PT_{s}.a)"]
        if kind == "template":
            templates.append(f"V[{s!r}]")
            return [store + f"qnb.static(t[{len(templates) - 1}] * 1.0)"]
        if kind == "subclass_template":
            templates.append(f"LyingStr('a' * int(V[{s!r}]))")
            return [store + f"qnb.static(float(len(t[{len(templates) - 1}])))"]
        if kind == "static_expression":
            self.cfg.append(f"S_{s} = V[{s!r}]")
            self.top.append(f"G_{s} = V[{s!r}] + 1.0")
            return [store + f"qnb.static(G_{s} * 2.0 + fz_cfg.S_{s})"]
        if kind == "branch":
            self.cfg.append(f"B_{s} = V[{s!r}] > 1.5")
            self.top += ["@qnb.func", f"def flag_{s}(m):", f"    return m.B_{s}"]
            return [
                f"if flag_{s}(fz_cfg):",
                f"    x[{j}] = 1.0",
                "else:",
                f"    x[{j}] = -1.0",
            ]
        if kind == "rebound_module":
            self.cfg.append(f"R_{s} = 10.0")
            self.cfg2.append(f"R_{s} = 20.0")
            self.top.append(f"M_{s} = fz_cfg if V[{s!r}] == 'a' else fz_cfg2")
            self.top += ["@qnb.func", f"def r_{s}(m):", f"    return m.R_{s}"]
            return [store + f"r_{s}(M_{s})"]
        return self.object_slot(kind, s, store)

    def mutation(self, code):
        """A change made in place by ``mutate()``, from the second value set ``W``."""
        self.top += [f"MUTATIONS.append(lambda W: {code})"]

    def object_slot(self, kind, s, store):
        """Configuration objects, and values of subclasses with lying repr/==/hash."""
        if kind == "frozen_dataclass":
            self.top.append(f"FR_{s} = Frozen(V[{s!r}])")
            return [store + f"FR_{s}.v"]
        if kind == "dataclass":
            self.top.append(f"DC_{s} = Block(V[{s!r}])")
            self.mutation(f"setattr(DC_{s}, 'v', W[{s!r}])")
            return [store + f"qnb.static(DC_{s}.v * 3.0)"]
        if kind == "namespace":
            self.top.append(
                f"NS_{s} = types.SimpleNamespace(inner=types.SimpleNamespace(v=V[{s!r}]))"
            )
            self.mutation(f"setattr(NS_{s}.inner, 'v', W[{s!r}])")
            return [store + f"NS_{s}.inner.v"]
        if kind == "nested_object":
            self.top.append(f"OB_{s} = Outer(Block(V[{s!r}]))")
            self.mutation(f"setattr(OB_{s}, 'block', Block(W[{s!r}]))")  # a new inner object
            return [store + f"OB_{s}.block.v + 0.5"]
        if kind == "object_to_func":
            self.top.append(f"OF_{s} = Outer(Block(V[{s!r}]))")
            self.top += ["@qnb.func", f"def of_{s}(c):", "    return c.block.v * 2.0"]
            self.mutation(f"setattr(OF_{s}, 'block', Block(W[{s!r}]))")  # past the snapshot
            return [store + f"of_{s}(OF_{s})"]
        if kind == "namespace_to_func":
            self.top.append(f"NF_{s} = types.SimpleNamespace(v=V[{s!r}])")
            self.top += ["@qnb.func", f"def nf_{s}(c):", "    return qnb.static(c.v + 1.0)"]
            self.mutation(f"setattr(NF_{s}, 'v', W[{s!r}])")
            return [store + f"nf_{s}(NF_{s})"]
        if kind == "object_local":
            self.top.append(f"OL_{s} = Outer(Block(V[{s!r}]))")
            self.mutation(f"setattr(OL_{s}, 'block', Block(W[{s!r}]))")
            return [f"b_{s} = OL_{s}.block", store + f"b_{s}.v"]
        if kind == "class_attribute":
            self.top += [f"class CA_{s}:", f"    v = V[{s!r}]"]
            self.mutation(f"setattr(CA_{s}, 'v', W[{s!r}])")
            return [store + f"CA_{s}.v"]
        if kind in ("enum_iteration", "enum_class_via_module"):
            target = self.top if kind == "enum_iteration" else self.cfg
            if kind == "enum_class_via_module":
                target.append("import enum")
            target += [
                f"class EN_{s}(enum.Enum):",
                "    A = 1",
                f"    B = int(V[{s!r}]) + 1",
                f"    if V[{s!r}] > 2.5:",
                "        C = 10",
            ]
            if kind == "enum_iteration":
                return [store + f"qnb.static(sum(e.value for e in EN_{s}) * 1.0)"]
            self.top += [
                "@qnb.func",
                f"def en_{s}(m):",
                f"    return qnb.static(len(m.EN_{s}) * 1.0)",
            ]
            return [store + f"en_{s}(fz_cfg)"]
        if kind in SUBCLASSES:
            value, use = SUBCLASSES[kind]
            self.top.append(f"SB_{s} = " + value.replace("[s]", f"[{s!r}]"))
            return [store + use.replace("NAME", f"SB_{s}")]
        raise AssertionError(kind)

    def write(self, directory):
        for name, lines in (("fz_cfg", self.cfg), ("fz_cfg2", self.cfg2), ("fz_kernels", self.top)):
            (directory / f"{name}.py").write_text("\n".join(lines) + "\n")
        (directory / "fz_cases.json").write_text(json.dumps(self.cases))

    def values(self, rng, previous=None):
        """A value set: the first at random, each later one changing some slots."""
        if previous is None:
            return {s: rng.choice(domain(kind)) for s, kind in self.slots.items()}
        return {
            s: rng.choice(domain(kind)) if rng.random() < 0.5 else previous[s]
            for s, kind in self.slots.items()
        }


DRIVER = textwrap.dedent(
    r"""
    import json, os, sys
    import numpy as np
    import qnb
    sys.path.insert(0, sys.argv[1])
    import fz_kernels as m
    qnb.set_backend("cpu")
    cases = json.load(open(os.path.join(sys.argv[1], "fz_cases.json")))
    stale, outcomes = [], {}

    def launch(case):
        k = getattr(m, "K" + case["name"][1:])
        x = np.full(case["slots"], -99.0, np.float32)
        if case["template"]:
            k(x, getattr(m, "T" + case["name"][1:]))
        else:
            k(x)
        return x.tolist()

    V = json.load(open(os.environ["FZ_VALUES"]))
    W = dict(V)  # (the kinds mutate() leaves alone keep their V values)

    def compare(case, when):
        os.environ["QNB_ALWAYS_COMPILE"] = "0"
        cached = launch(case)
        cached_again = launch(case)  # (a memory hit: the memo, or its hot entry)
        outcome = qnb.cache.events()[-2].outcome
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        os.environ["QNB_ALWAYS_COMPILE"] = "1"
        fresh = launch(case)
        want = np.array([eval(e, {"V": V, "W": W}) for e in case["expected"]], np.float32)
        if cached != fresh or cached_again != fresh or fresh != want.tolist():
            stale.append([case["name"], case["kinds"], when, outcome, cached, cached_again, fresh, want.tolist()])

    for case in cases:
        compare(case, "loaded")
    m.mutate()  # attributes changed in place, nested objects replaced
    W.update(json.load(open(os.environ["FZ_MUTATED"])))
    for case in cases:
        compare(case, "mutated")
    print(json.dumps({"stale": stale, "outcomes": outcomes}))
    """
)


def run_batch(directory, batch: Batch, rng) -> tuple[list, dict]:
    batch.write(directory)
    values, stale, outcomes = None, [], {}
    for _ in range(ROUNDS):
        values = batch.values(rng, values)
        (directory / "values.json").write_text(json.dumps(values))
        (directory / "mutated.json").write_text(json.dumps(batch.values(rng, values)))
        env = {
            "QNB_CACHE_DIR": str(directory / "cache"),
            "QNB_CACHE": "1",
            "FZ_VALUES": str(directory / "values.json"),
            "FZ_MUTATED": str(directory / "mutated.json"),
        }
        result = run_python(DRIVER, env=env, args=[str(directory)], timeout=900)
        assert result.returncode == 0, result.stderr[-4000:]
        report = json.loads(result.stdout.strip().splitlines()[-1])
        stale += [[*s, values] for s in report["stale"]]
        for outcome, count in report["outcomes"].items():
            outcomes[outcome] = outcomes.get(outcome, 0) + count
    return stale, outcomes


def test_no_launch_from_the_warm_cache_differs_from_a_fresh_compile(tmp_path):
    rng = random.Random(SEED)
    stale, outcomes, done = [], {}, 0
    while done < CASES:
        count = min(PER_BATCH, CASES - done)
        directory = tmp_path / f"batch{done}"
        directory.mkdir()
        found, seen = run_batch(directory, Batch(rng, count), rng)
        stale += found
        for outcome, n in seen.items():
            outcomes[outcome] = outcomes.get(outcome, 0) + n
        done += count
        if CASES > PER_BATCH:  # a long run says how far it got
            print(f"{done} cases, {len(stale)} stale, launches {outcomes}", flush=True)
    print(f"stale-kernel fuzzer: {CASES} cases, {ROUNDS} processes each, launches: {outcomes}")
    assert not stale, json.dumps(stale[:3])
    assert outcomes.get("disk-hit", 0) > 0  # the warm cache was really used
