"""Many generated CUDA kernels through NVRTC as few programs, for the every-op and
every-shape compile checks.

Most of a small kernel's NVRTC compile is the same fixed cost every time (starting the
compiler, parsing ``cuda_fp16.h`` and ``mma.h``), so compiling 300 kernels one by one
spends most of the time on it. Here the kernels that include the same headers go into one
program, each in a namespace of its own (its prelude, its helpers) with its entry renamed,
so each sees what it would alone: its own ``#include`` lines and its own definitions,
nothing of the others'. Every renamed entry must then be in the PTX and in the cubin.
When a program fails, each of its kernels is compiled alone, to name the failing ones
with their own NVRTC log.

What compiled is kept in ``build/nvrtc/``, once per (text, arch, NVRTC command line, NVRTC
version): the renamed entry and the kernel's own PTX, which is all the checks look at. The
same text compiled again for the same arch (cuda-host's ``nvrtc_check`` runs every kernel
it builds through NVRTC for sm_90; the every-shape and suite compiles run many of the same
kernels) then reads what NVRTC made of it. A failure is never kept: it compiles again, and
fails with its log.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pathlib
import re
import tempfile
from dataclasses import dataclass

from qnb.backends import cuda
from qnb.backends.base import Options
from qnb.backends.cuda import nvrtc_compile, nvrtc_options
from qnb.errors import BackendError, CompileError

_ENTRY = re.compile(r'^extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(', re.M)
# a PTX function or kernel starts a line; its name is on that line
_PTX_FUNCTION = re.compile(r"^(?:\.visible |\.weak )?\.(?:entry|func)\b.*$", re.M)


# what compiled, by (text, arch, command line, NVRTC version): see the module docstring
STORE = pathlib.Path(__file__).resolve().parents[2] / "build" / "nvrtc"

# kernels per program: past a few dozen, a bigger program saves no more (it compiles slower
# per kernel)
BATCH = 32


@dataclass
class Unit:
    """One kernel's CUDA source (as ``render``/``kernel.source`` wrote it)."""

    label: str  # the name a failure is reported under
    source: str


@dataclass
class Compiled:
    label: str
    entry: str  # the renamed entry, as the PTX and cubin name it
    ptx: str  # this kernel's own PTX functions (its entry, its namespace's helpers)


def toolchain_reason() -> str | None:
    """Why NVRTC cannot compile here (no wheel, no CUDA headers), or None when it can."""
    try:
        cuda.nvrtc_version()
        cuda.include_dirs()
    except BackendError as exc:
        return exc.message
    return None


def _stored_path(source: str, arch: str, options: Options) -> pathlib.Path:
    key = "\0".join([source, arch, *nvrtc_options(arch, options), cuda.nvrtc_version()])
    return STORE / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def stored(source: str, arch: str, options: Options = Options()) -> Compiled | None:
    """What NVRTC made of ``source`` for ``arch`` when it compiled before (label "")."""
    try:
        found = json.loads(_stored_path(source, arch, options).read_text())
    except (OSError, ValueError):
        return None
    return Compiled("", found["entry"], found["ptx"])


def store(source: str, arch: str, options: Options, compiled: Compiled) -> None:
    """Keep ``compiled`` (its entry and own PTX) for ``source``: written whole, then renamed."""
    path = _stored_path(source, arch, options)
    STORE.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=STORE, suffix=".part", delete=False) as f:
        json.dump({"entry": compiled.entry, "ptx": compiled.ptx}, f)
    os.replace(f.name, path)


def _entry(source: str) -> str:
    found = _ENTRY.findall(source)
    assert len(found) == 1, f"expected one kernel entry, found {found}"
    return found[0]


def split_includes(source: str) -> tuple[tuple[str, ...], str]:
    """(the #include lines, the rest)."""
    includes, rest = [], []
    for line in source.splitlines():
        (includes if line.startswith("#include") else rest).append(line)
    return tuple(includes), "\n".join(rest)


def renamed_body(source: str, tag: str, entry: str | None = None) -> tuple[str, str]:
    """A kernel's source without its ``#include`` lines (which a batch puts first, once)
    and with its entry (found in ``source`` where not given) renamed ``{tag}_{entry}``, to
    sit in ``namespace tag`` beside other kernels: (the renamed entry, the body)."""
    entry = entry or _entry(source)
    renamed = f"{tag}_{entry}"
    return renamed, re.sub(rf"\b{entry}\(", f"{renamed}(", split_includes(source)[1], count=1)


def _own_ptx(ptx: str, tag: str) -> str:
    """The PTX functions whose header line names ``tag`` (a kernel's namespace)."""
    starts = [m.start() for m in _PTX_FUNCTION.finditer(ptx)] + [len(ptx)]
    chunks = [ptx[a:b] for a, b in itertools.pairwise(starts)]
    return "".join(chunk for chunk in chunks if tag in chunk.split("\n", 1)[0])


def compile_units(
    units: list[Unit], arch: str, options: Options = Options(), reuse: bool = True
) -> tuple[list[Compiled], list[str]]:
    """Compile ``units`` for ``arch``: (what compiled, in the order given; one message per
    failing kernel). With ``reuse``, a unit whose text compiled before for ``arch`` (in
    ``STORE``) is not compiled again; what compiles is stored either way."""
    groups: dict[tuple[str, ...], list[tuple[int, Unit]]] = {}
    compiled, failures = [], []
    for index, unit in enumerate(units):
        found = stored(unit.source, arch, options) if reuse else None
        if found is not None:
            compiled.append((index, Compiled(unit.label, found.entry, found.ptx)))
        else:
            groups.setdefault(split_includes(unit.source)[0], []).append((index, unit))
    batches = [
        (includes, members[start : start + BATCH])
        for includes, members in groups.items()
        for start in range(0, len(members), BATCH)
    ]
    for includes, members in batches:
        parts, names = list(includes), []
        for index, unit in members:
            tag = f"qnbk{index}x"  # ends in x: "qnbk1x" is no part of "qnbk17x"
            renamed, body = renamed_body(unit.source, tag)
            parts += [f"namespace {tag} {{", body, f"}}  // namespace {tag}"]
            names.append((index, unit, tag, renamed))
        try:
            cubin, ptx, _log = nvrtc_compile("\n".join(parts), arch, options, name="batch.cu")
        except CompileError:
            alone, failed = _alone([unit for _index, unit in members], arch, options)
            compiled += [(index, done) for (index, _unit), done in zip(members, alone) if done]
            failures += failed
            continue
        assert f".target sm_{arch.split('_')[1]}" in ptx
        assert cubin is None or cubin[:4] == b"\x7fELF"
        for index, unit, tag, renamed in names:
            if f".entry {renamed}(" not in ptx:
                failures.append(f"{unit.label}: entry {renamed} is not in the PTX")
            elif cubin is not None and renamed.encode() not in cubin:
                failures.append(f"{unit.label}: entry {renamed} is not in the cubin")
            else:
                compiled.append((index, Compiled(unit.label, renamed, _own_ptx(ptx, tag))))
                store(unit.source, arch, options, compiled[-1][1])
    return [unit for _index, unit in sorted(compiled, key=lambda pair: pair[0])], failures


def _alone(
    units: list[Unit], arch: str, options: Options
) -> tuple[list[Compiled | None], list[str]]:
    """Each unit compiled alone (after their batch failed): (each one's Compiled, or None
    where it failed; one message per failure), storing what compiled."""
    compiled, failures = [], []
    for unit in units:
        try:
            _cubin, ptx, _log = nvrtc_compile(unit.source, arch, options)
        except CompileError as exc:
            compiled.append(None)
            failures.append(f"{unit.label}: {exc}\n{exc.log}")
        else:
            entry = _entry(unit.source)
            compiled.append(Compiled(unit.label, entry, ptx))
            store(unit.source, arch, options, compiled[-1])
    return compiled, failures or [f"{[u.label for u in units]}: fail together, compile alone"]
