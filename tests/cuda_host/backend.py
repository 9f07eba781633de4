"""The tests' extras around the ``cuda-host`` backend (``qnb.backends.cuda_host``).

``tests/conftest.py`` registers :class:`CheckedCudaHostBackend` under the name
``cuda-host`` for the test run: the product backend, plus

- an NVRTC check of every kernel it compiles (``nvrtc_check``: the same text through
  NVRTC for sm_90 where NVRTC is installed), so g++'s view of the code cannot hide what
  NVRTC rejects;
- ``prebuild``: a test file's kernels built 32 to a library (``build_many``: one g++ run
  for many, each kernel in a namespace of its own), which ``compile`` then finds;
- a build directory that outlives the run (``build/cuda-host/``), so a second run of the
  suite compiles nothing again (test-only: the product builds what it has not built this
  process, and loads only libraries whose bytes its cache entry recorded).

``racecheck.py`` builds ThreadSanitizer programs from the same pieces.
"""

from __future__ import annotations

import hashlib
import pathlib

from qnb.backends.base import Artifact, Options
from qnb.backends.cuda_host import (
    CudaHostBackend,
    c_param_types,
    host_text,
)
from qnb.backends.cuda_host import build as build
from qnb.backends.cuda_render import render_cuda
from qnb.errors import BackendError
from qnb.ir import KernelIR

SHIM = build.SHIM
BUILD = pathlib.Path(__file__).resolve().parents[2] / "build" / "cuda-host"

# What a hand-written artifact says of its launch shape: blocks of 256 threads, a block per
# program (the shape of the probes and of a kernel that holds tiles).
ONE_PROGRAM = {"threads": 256, "programs_per_block": 1}


def compile_once(
    text: str, stem: str, flags: list[str], inputs: tuple[pathlib.Path, ...] = ()
) -> pathlib.Path:
    """``text`` compiled by g++ with ``flags`` (the header stand-ins added), linked with
    ``inputs``, into ``build/cuda-host/<stem>-<digest>``, once per text, flags and host
    model (the inputs are this process's own, so they are named by what they are built
    from, not by their paths)."""
    named = [pathlib.Path(f).name if "/" in f else f for f in [*flags, *map(str, inputs)]]
    key = "\0".join([build.emulation_digest(), build.compiler()[1], *named, text])
    output = BUILD / f"{stem}-{hashlib.sha256(key.encode()).hexdigest()[:24]}"
    if not output.exists():
        build.compile_text(text, output, flags, inputs)
    return output


# kernels per library in build_many: past a few dozen, a bigger one saves no more
BATCH = 32
# what build_many built: a kernel's host text -> the library (in the product's build
# directory) and the symbol it is under there
_BUILT_MANY: dict[str, build.Library] = {}


def _kept(text: str, stem: str, symbol: str = build.ENTRY) -> build.Library:
    """The library of ``text`` built (or found) in ``build/cuda-host/``, copied into the
    backend's build directory and adopted there for ``text`` (``build.adopt``)."""
    kept = compile_once(text, stem, build.kernel_flags(), (build.runtime_object(),))
    data = kept.read_bytes()
    name = f"{stem}-{hashlib.sha256(data).hexdigest()[:32]}.so"
    target = build.build_directory()
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not (target / name).exists():
        from qnb.cache import store

        store.write_atomically(target, target / name, data)
    return build.Library(name, hashlib.sha256(data).hexdigest(), symbol)


class CheckedCudaHostBackend(CudaHostBackend):
    """cuda-host as the tests run it (see the module docstring)."""

    def compile(self, ir: KernelIR, options: Options = Options()) -> Artifact:
        rendered, text = self.rendered(ir, options)
        whole = host_text(text)
        if whole not in _BUILT_MANY:
            build.adopt(whole, _kept(whole, rendered.entry))
        artifact = super().compile(ir, options)  # (finds the library adopted above)
        nvrtc_check(rendered.text, rendered.entry, options)
        return artifact

    def prebuild(self, kernels: list[tuple[KernelIR, Options]]) -> None:
        """Compile many kernels ahead, as few g++ and NVRTC runs (``build_many``,
        ``nvrtc_check_many``), so that ``compile`` and ``load`` of each then find it
        built and checked. Changes nothing that is checked: a kernel whose batch fails
        is built and checked alone when it is compiled."""
        rendered = [(render_cuda(kernel, options), options) for kernel, options in kernels]
        build_many([(r.text, r.entry, r.abi, r.threads) for r, _options in rendered])
        nvrtc_check_many([(r.text, options) for r, options in rendered])


def prebuild_in_batches(backend, keys, kernel_of):
    """``prebuild(key)`` for a test file's cuda-host kernels: the first time a key is asked
    for, ``backend.prebuild`` builds the run of ``BATCH`` keys that holds it (``kernel_of(key)``
    gives each one's ``(KernelIR, Options)``), so each test then compiles its own kernel from
    what was built; a kernel whose batch fails is compiled alone, failing its own test."""
    keys, built = list(keys), set()

    def prebuild(key) -> None:
        start = keys.index(key) // BATCH * BATCH
        if start not in built:
            built.add(start)
            backend.prebuild([kernel_of(k) for k in keys[start : start + BATCH]])

    return prebuild


def build_many(kernels: list[tuple[str, str, list[dict], int]]) -> None:
    """Build many kernels (``(source, entry, abi, threads)`` each) as few g++ runs, so that
    ``compile`` of each then only finds it: most of a kernel's compile is g++'s fixed cost
    (starting, reading the precompiled shim). Up to ``BATCH`` kernels go into one library,
    each in a namespace of its own (its prelude, its helpers) with its entry and host entry
    renamed, so each sees what it would alone (the #include lines, the header stand-ins,
    go first). A batch g++ rejects is left unbuilt: each of its kernels then compiles alone,
    where the error names it."""
    pending = {}
    for source, entry, abi, threads in kernels:
        text = host_text({"source": source, "entry": entry, "abi": abi, "threads": threads})
        if text not in _BUILT_MANY:
            pending[text] = (source, entry, abi, threads)
    todo = list(pending.items())
    for start in range(0, len(todo), BATCH):
        batch = todo[start : start + BATCH]
        lines = batched_lines([kernel for _text, kernel in batch], "qnbh")
        try:
            library = _kept("\n".join(lines), "batch")
        except BackendError:
            continue
        for index, (text, _kernel) in enumerate(batch):
            _BUILT_MANY[text] = library._replace(symbol=batched_entry(index))
            build.adopt(text, _BUILT_MANY[text])


def batched_lines(kernels: list[tuple[str, str, list[dict], int]], prefix: str, inside=None):
    """The lines of one program holding ``kernels`` (``(source, entry, abi, threads)``
    each), the #include lines first, then each kernel in a namespace of its own
    (``batched_namespace``) (its prelude, its helpers, its entry renamed) with its host entry
    ``batched_entry(index)`` and the lines ``inside(index, abi)`` gives (none where None)."""
    from tests.backends.nvrtc_batch import renamed_body, split_includes

    includes, parts = set(), []
    for index, (source, entry, abi, threads) in enumerate(kernels):
        tag = batched_namespace(prefix, index)
        includes.update(split_includes(source)[0])
        renamed, body = renamed_body(source, tag, entry)
        parts += [f"namespace {tag} {{", body]
        parts.append(build.host_entry(renamed, c_param_types(abi), threads, batched_entry(index)))
        parts += [*(inside(index, abi) if inside else ()), f"}}  // namespace {tag}"]
    return [*sorted(includes), *parts]


def batched_namespace(prefix: str, index: int) -> str:
    """The namespace of the kernel at ``index`` of ``batched_lines(..., prefix)``."""
    return f"{prefix}{index}x"


def batched_entry(index: int) -> str:
    """The host entry of the kernel at ``index`` of ``batched_lines``."""
    return f"qnb_host_entry_{index}"


def _nvrtc_missing() -> bool:
    """Whether NVRTC or its headers are missing (test_cuda_compile.py says why, or fails
    in CI)."""
    from tests.backends.nvrtc_batch import toolchain_reason

    return toolchain_reason() is not None


def nvrtc_check(source: str, entry: str, options: Options) -> None:
    """The same text through NVRTC to a cubin for sm_90 (where NVRTC and its headers are
    installed): every kernel a test runs on cuda-host also compiles for a GPU, so g++'s
    view of the code cannot hide what NVRTC rejects. A rejection raises CompileError, and
    the test fails. Once per text: what compiled is kept by ``nvrtc_batch`` (``store``),
    where the every-shape and suite compiles find it too, and it finds theirs."""
    from qnb.backends import cuda
    from tests.backends import nvrtc_batch

    if _nvrtc_missing() or nvrtc_batch.stored(source, "sm_90", options) is not None:
        return
    cubin, ptx, _log = cuda.nvrtc_compile(source, "sm_90", options, name=f"{entry}.cu")
    assert cubin[:4] == b"\x7fELF" and f".entry {entry}(" in ptx
    nvrtc_batch.store(source, "sm_90", options, nvrtc_batch.Compiled(entry, entry, ptx))


def nvrtc_check_many(kernels: list[tuple[str, Options]]) -> None:
    """``nvrtc_check`` of many kernels (``(source, options)`` each) as few NVRTC programs
    (``nvrtc_batch``: each kernel alone in a namespace). A kernel NVRTC rejects is left
    unstored: its own ``nvrtc_check`` then compiles it alone, and fails naming it."""
    from tests.backends.nvrtc_batch import Unit, compile_units

    if _nvrtc_missing():
        return
    groups: dict[str, tuple[Options, list[str]]] = {}
    for source, options in kernels:
        group = groups.setdefault(repr(options.as_component()), (options, []))
        if source not in group[1]:
            group[1].append(source)
    for options, sources in groups.values():
        # compile_units stores what compiles (and reads what was stored before)
        compile_units([Unit(str(k), source) for k, source in enumerate(sources)], "sm_90", options)
