"""``%%qkernel``, ``%qcache``, ``%qbackend`` and ``%qbench``: a thin shell over qnb's
public API, in the manner of Cython's ``%%cython``.

A ``%%qkernel`` cell runs in the user namespace under its own file name (registered in
:mod:`linecache`), so kernels, errors and tracebacks point at the cell's own lines.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import linecache
import os
import shlex
import warnings

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

import qnb
from qnb.magics.bench import BENCH_FILENAME, bench
from qnb.magics.display import GeneratedSource, show_error
from qnb.viz.events import event_detail, status_line

LANGUAGES = ("ir", "cuda", "wgsl")
REASON_CHARS = 80  # a status line's reason, at most (%qcache explain NAME has it all)


def _is_kernel(value) -> bool:
    kernel_type = getattr(qnb, "Kernel", None)
    if kernel_type is not None:
        return isinstance(value, kernel_type)
    return hasattr(value, "is_fully_annotated") and hasattr(value, "compile")


@magics_class
class QnbMagics(Magics):
    def __init__(self, shell=None, **kwargs):
        super().__init__(shell, **kwargs)
        self._cells = 0

    # ----------------------------------------------------------------------------- qkernel

    @magic_arguments()
    @argument(
        "-b",
        "--backend",
        help="backend for this cell's compiles and its kernels' default: cpu, wgpu, cuda or auto",
    )
    @argument(
        "--show",
        choices=LANGUAGES,
        action="append",
        default=[],
        help="show the generated code (ir, cuda or wgsl); may be repeated",
    )
    @argument(
        "--no-cache",
        action="store_true",
        help="compile even if the kernel cache has an entry (QNB_ALWAYS_COMPILE=1)",
    )
    @argument(
        "--trace",
        action="store_true",
        help="show each compile's cache outcome, reason and key components",
    )
    @cell_magic
    def qkernel(self, line, cell):
        """Define kernels: every function the cell defines becomes a qnb kernel.

        Kernels whose parameters are all annotated compile at once, so errors show at the
        cell, as its own line with a caret. One status line per kernel says whether it
        was compiled, loaded from disk or found in memory, with its short cache key, and
        why, where a compile or a disk load was not the kernel's first in this process
        (what changed in its key, e.g. ``(captured.ALPHA: 2.0 → 3.0)``).

        When a function's definition fails (an unsupported construct, say), its name is
        bound to a :class:`FailedDefinition`: calling or launching it raises the same
        error again, naming the cell's line, so the kernel an earlier run of the cell
        defined is never run by mistake. Fix the cell and run it again.
        """
        args = parse_argstring(self.qkernel, line)
        # Line 1 of the cell as the user sees it is "%%qkernel ...": a blank line in its
        # place keeps the line numbers of errors, tracebacks and traces the cell's own.
        cell = "\n" + cell
        filename = self._register_cell(cell)
        try:
            with self._cell_settings(args):
                result, kernels = self._run_cell(cell, filename, args.backend)
                for kernel in kernels:
                    self._compile_and_report(kernel, args)
        except qnb.QnbError as err:
            raise show_error(err) from None
        return result

    def _register_cell(self, cell: str) -> str:
        self._cells += 1
        filename = f"<qkernel-cell-{self._cells}>"
        # mtime None: linecache.checkcache keeps the entry (as for IPython's own cells).
        linecache.cache[filename] = (len(cell), None, cell.splitlines(keepends=True), filename)
        return filename

    @contextlib.contextmanager
    def _cell_settings(self, args):
        with contextlib.ExitStack() as stack:
            if args.backend:
                stack.enter_context(qnb.backend(args.backend))
            if args.no_cache:
                stack.enter_context(_environment("QNB_ALWAYS_COMPILE", "1"))
            yield

    def _run_cell(self, cell: str, filename: str, backend: str | None):
        """Run the cell in the user namespace; make its plain functions kernels (on
        ``backend`` by default, if given). Returns the value of a final expression (shown
        as the cell's result) and the kernels the cell defines. A function whose
        definition fails is bound to a FailedDefinition, and the error raised."""
        try:
            tree = ast.parse(cell, filename)
        except SyntaxError as err:
            # IPython would print a SyntaxError with this module's frames: as a qnb error
            # it shows as the cell's line and a caret, like every other error in a kernel.
            col = err.offset - 1 if err.offset else None
            raise qnb.QnbSyntaxError(err.msg, filename, err.lineno, col) from None
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        namespace = self.shell.user_ns
        defined = [
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        # dont_inherit: this module's own `from __future__ import annotations` must not
        # turn the cell's annotations into strings.
        code = compile(tree, filename, "exec", dont_inherit=True)
        try:
            _run(code, namespace, filename, self.shell)
        except Exception as err:
            if isinstance(err, qnb.QnbError):  # a decorator (@qnb.kernel) refused its function
                name = _failed_definition(tree, err, filename, namespace)
                if name is not None:
                    namespace[name] = FailedDefinition(name, err)
            _make_kernels(defined, namespace, filename, backend)  # those defined before it
            raise
        kernels, failures = _make_kernels(defined, namespace, filename, backend)
        if failures:  # every other function of the cell is a kernel now
            raise failures[0]
        result = None
        if last is not None:
            expression = ast.Expression(last.value)
            code = compile(expression, filename, "eval", dont_inherit=True)
            result = _run(code, namespace, filename, self.shell)
        return result, list(kernels.values())

    def _compile_and_report(self, kernel, args) -> None:
        name = getattr(kernel, "name", "kernel")
        if not kernel.is_fully_annotated:
            print(
                f"{name}: defined; compiles at its first launch (not every parameter is annotated)"
            )
            for language in args.show:
                print(
                    f"  --show {language}: call {name}.source({language!r}, *args) "
                    "with example arguments"
                )
            return
        # Inside qnb.backend(-b): a kernel's own backend (from its decorator) still wins.
        event = kernel.compile()
        if event is None:
            print(f"{name}: compiled")
            return
        print(_status_line(event, name))
        if args.trace:
            print("  " + event_detail(event).replace("\n", "\n  "))
        for language in args.show:
            display(GeneratedSource(name, language, kernel.source(language)))

    # ------------------------------------------------------------------------------ qcache

    @magic_arguments()
    @argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "stats", "clear", "explain"),
        help="list events (default), show stats, clear both levels, or explain NAME",
    )
    @argument("name", nargs="?", help="for explain: a kernel (or its name)")
    @line_magic
    def qcache(self, line):
        """The kernel cache: ``%qcache [list|stats|clear|explain NAME]``."""
        args = parse_argstring(self.qcache, line)
        if args.name is not None and args.action != "explain":
            raise UsageError(
                f"%qcache {args.action} takes no argument (got {args.name!r}); "
                "only %qcache explain NAME does"
            )
        if args.action == "list":
            print(_event_table(qnb.cache.events()))
        elif args.action == "stats":
            stats = qnb.cache.stats()
            width = max(len(k) for k in stats) if stats else 0
            print("\n".join(f"{key:<{width}}  {value}" for key, value in stats.items()))
        elif args.action == "clear":
            with warnings.catch_warnings():  # the failure is said here, once
                warnings.simplefilter("ignore", qnb.cache.CacheWarning)
                result = qnb.cache.clear()
            if result.failed:  # the cell fails, with the message only
                raise show_error(OSError(f"qnb kernel cache: memory cleared; on disk {result}"))
            print(f"qnb kernel cache cleared: memory, and {result}")
        else:
            if not args.name:
                raise UsageError("%qcache explain needs a kernel name: %qcache explain NAME")
            target = self.shell.user_ns.get(args.name, args.name)
            print(qnb.cache.explain(target if _is_kernel(target) else args.name))

    # ---------------------------------------------------------------------------- qbackend

    @magic_arguments()
    @argument("name", nargs="?", help="cpu, wgpu, cuda or auto; omit to list the backends")
    @line_magic
    def qbackend(self, line):
        """Show the backends, or choose the default: ``%qbackend [NAME]``."""
        args = parse_argstring(self.qbackend, line)
        try:
            if args.name:
                qnb.set_backend(args.name)
            print(_backend_table())
        except qnb.QnbError as err:
            raise show_error(err) from None

    # ------------------------------------------------------------------------------ qbench

    @magic_arguments()
    @argument(
        "-n",
        "--runs",
        type=int,
        default=0,
        help="timed runs (default: as many as fit in about half a second, 3 to 1000)",
    )
    @argument("-w", "--warmup", type=int, default=2, help="untimed runs first (default 2)")
    @argument("--bytes", type=float, help="bytes moved per launch (default: estimated)")
    @argument("--flops", type=float, help="floating-point operations per launch")
    @argument("-o", "--output", action="store_true", help="return the BenchResult")
    @argument(
        "-b",
        "--backend",
        help="run EXPR with this backend active (cpu, wgpu, cuda or auto), as "
        "qnb.backend(NAME) does; a kernel's own backend still wins",
    )
    @argument("expr", nargs="*", help="the launch expression, e.g. k[4, 4](a, b, c)")
    @line_magic
    def qbench(self, line):
        """Time a launch: ``%qbench [-n RUNS] [-w WARMUP] [--bytes B] [--flops F] [-o]
        [-b BACKEND] [--] EXPR``.

        Runs EXPR (after warm-up runs) with a device sync after each, and prints the
        median time, and GB/s and GFLOP/s where bytes and flops are known or can be
        estimated from the array arguments. ``-o`` returns the :class:`BenchResult`
        (its ``times`` hold every run's seconds).
        """
        options, expr = _split_options(self.qbench, line)
        if options is None:
            print(self.qbench.parser.format_help())
            return None
        args = parse_argstring(self.qbench, options)
        if not expr.strip():
            raise UsageError("%qbench needs a launch expression, e.g. %qbench k[4, 4](a, b, c)")
        for name, flag in (("runs", "-n/--runs"), ("warmup", "-w/--warmup")):
            if getattr(args, name) < 0:
                raise UsageError(f"%qbench {flag} must be 0 or more, not {getattr(args, name)}")
        for name in ("bytes", "flops"):
            value = getattr(args, name)
            if value is not None and not value >= 0:  # (also refuses nan)
                raise UsageError(f"%qbench --{name} must be 0 or more, not {value}")
        try:
            with qnb.backend(args.backend) if args.backend else contextlib.nullcontext():
                result = bench(
                    expr,
                    self.shell.user_ns,
                    runs=args.runs,
                    warmup=args.warmup,
                    nbytes=args.bytes,
                    flops=args.flops,
                )
        except qnb.QnbError as err:
            raise show_error(err) from None
        except SyntaxError as exc:
            raise UsageError(f"%qbench cannot parse {expr.strip()!r}: {exc.msg}") from None
        except Exception as exc:
            _from_frame_of(exc, BENCH_FILENAME, self.shell)
            raise
        print(result)
        return result if args.output else None


class FailedDefinition:
    """What a ``%%qkernel`` cell binds a function's name to when its definition failed
    (``error``): calling it, launching it (``k[grid](...)``), ``source``, ``compile``
    and ``trace`` raise that error again, so an older kernel of the same name cannot be
    run by mistake, nor the bare Python function (which can only fail, far from the
    cause). Running the fixed cell binds the name to a kernel again."""

    def __init__(self, name: str, error: qnb.QnbError):
        self.name, self.error = name, error

    def _raise(self, *args, **kwargs):
        err = self.error
        text = (
            f"{self.name!r} is not a kernel: its last %%qkernel definition failed with\n"
            f"{type(err).__name__}: {err}"
        )
        err._render_traceback_ = lambda: text.splitlines()  # shown as for the cell
        raise err.with_traceback(None)

    __call__ = _raise
    __getitem__ = _raise
    source = compile = _raise

    @property
    def trace(self):
        self._raise()

    def __repr__(self) -> str:
        err = self.error
        where = f", {err.filename} line {err.lineno}" if err.lineno is not None else ""
        return f"<{self.name}: definition failed ({type(err).__name__}{where})>"


def _make_kernels(names, namespace, filename, backend):
    """Make the cell's plain functions ``names`` kernels (on ``backend`` by default, if
    given). Returns the kernels by name and the errors of the functions that could not
    be made kernels (each name is bound to a FailedDefinition)."""
    kernels, failures = {}, []
    for name in names:
        value = namespace.get(name)
        if inspect.isfunction(value) and value.__code__.co_filename == filename:
            chosen = backend if backend != "auto" else None
            try:
                value = namespace[name] = qnb.kernel(value, backend=chosen)
            except qnb.QnbError as err:
                namespace[name] = FailedDefinition(name, err)
                failures.append(err)
                continue
        if _is_kernel(value):
            if backend and value.backend is None:
                value.backend = backend  # -b is the default of decorated kernels too
            kernels[name] = value
    return kernels, failures


def _failed_definition(tree: ast.Module, err: qnb.QnbError, filename: str, namespace) -> str | None:
    """The function of the cell whose definition raised ``err``: the top-level ``def``
    holding its line (decorators included) whose name the cell did not bind (an error
    from a launch in the cell can point into a kernel the cell did define), or None."""
    if err.filename != filename or err.lineno is None:
        return None
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        if first <= err.lineno <= (node.end_lineno or node.lineno):
            value = namespace.get(node.name)
            function = getattr(value, "__wrapped__", value)  # a kernel's or func's own
            code = getattr(function, "__code__", None)
            return None if code is not None and code.co_filename == filename else node.name
    return None


def _status_line(event, name: str) -> str:
    """``status_line``, and why, for a compile or a disk load that was not the kernel's
    first in this process."""
    line = status_line(event, name)
    reason = _short_reason(event)
    return f"{line} ({reason})" if reason else line


def _short_reason(event) -> str:
    """What changed in the key (at most REASON_CHARS, then "+N more"); "" where there is
    nothing to say: a memory hit, a first compile, a first load in this process."""
    parts = [str(d) for d in getattr(event, "differences", None) or []]
    if not parts:
        if event.outcome != "miss" or not event.reason or event.reason == "first compile":
            return ""
        parts = [event.reason]  # a discarded entry, QNB_ALWAYS_COMPILE=1, …
    text, shown = parts[0], 1
    for part in parts[1:]:
        if len(text) + 2 + len(part) > REASON_CHARS:
            break
        text, shown = f"{text}; {part}", shown + 1
    if len(text) > REASON_CHARS:
        text = text[: REASON_CHARS - 1] + "…"
    if shown < len(parts):
        text += f"; +{len(parts) - shown} more"
    return text


def _run(code, namespace, filename, shell):
    """exec/eval ``code``. A Python error in the cell shows a traceback that starts at
    the cell's own frame (not in this module); qnb errors are left to the caller."""
    try:
        return eval(code, namespace)
    except qnb.QnbError:
        raise
    except Exception as exc:
        _from_frame_of(exc, filename, shell)
        raise


def _from_frame_of(exc: BaseException, filename: str, shell) -> None:
    """Make IPython show ``exc``'s traceback from the first frame of ``filename`` (the
    user's cell or expression), without the frames of qnb's magics above it."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is not None:
        with contextlib.suppress(AttributeError):
            exc._render_traceback_ = functools.partial(
                shell.InteractiveTB.structured_traceback, type(exc), exc, tb
            )


@contextlib.contextmanager
def _environment(name: str, value: str):
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


_HELP = ("-h", "--help")


def _split_options(magic, line: str) -> tuple[str | None, str]:
    """Split ``line`` into its leading options (as text for the magic's parser) and the
    expression, kept verbatim (it may hold spaces and quotes). Options are known from
    the magic's own parser; ``--`` ends them; ``-n2`` and ``--runs=2`` work as
    ``-n 2``. The options are None when the line asks for help."""
    name = f"%{magic.__name__}"
    actions = magic.parser._option_string_actions
    rest = line.strip()
    taken = []
    while rest.startswith("-"):
        word, after = _first_word(rest)
        if not word[1:2].isalpha() and word[:2] != "--":
            break  # an expression that starts with a minus: -1, -(k(x))
        rest = after
        if word == "--":
            break
        if word in _HELP:
            return None, rest
        flag, attached = word, None
        if word.startswith("--") and "=" in word:
            flag, attached = word.split("=", 1)
        elif not word.startswith("--") and len(word) > 2:
            flag, attached = word[:2], word[2:]
        action = actions.get(flag)
        if action is None:
            known = ", ".join(sorted(o for o in actions if o.startswith("--")))
            raise UsageError(f"{name}: unknown option {word!r} (options: {known}, -h)")
        taken.append(flag)
        if action.nargs == 0:
            if attached is not None:
                raise UsageError(f"{name}: option {flag} takes no value (got {word!r})")
            continue
        if attached is None:
            if not rest:
                raise UsageError(f"{name}: option {flag} needs a value")
            attached, rest = _first_word(rest)
        taken.append(attached)
    return " ".join(shlex.quote(w) for w in taken), rest


def _first_word(text: str) -> tuple[str, str]:
    """The first word of ``text`` and the rest, without leading whitespace."""
    parts = text.split(None, 1)
    return parts[0], parts[1] if len(parts) > 1 else ""


def _event_table(events) -> str:
    """One row per event; consecutive memory hits of one kernel share a row (×count)."""
    if not events:
        return "no kernel cache events yet"
    header = ("kernel", "backend", "outcome", "ms", "key", "reason")
    rows, previous = [], None
    for e in events:
        name = str(getattr(e.kernel, "name", e.kernel))
        same = (name, e.backend, e.outcome, e.short_key)
        if e.outcome == "memory-hit" and same == previous:
            rows[-1][1] += 1
            continue
        previous = same
        rows.append(
            [
                [
                    name,
                    e.backend,
                    e.outcome,
                    f"{(e.seconds or 0) * 1e3:.2f}",
                    e.short_key,
                    e.reason or "",
                ],
                1,
            ]
        )
    table = [header]
    for cells, count in rows:
        if count > 1:
            cells[2] += f" ×{count}"
        table.append(tuple(cells))
    widths = [max(len(r[k]) for r in table) for k in range(len(header) - 1)]
    return "\n".join(
        ("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]).rstrip() for r in table
    )


def _backend_table() -> str:
    registry = importlib.import_module("qnb.backends")  # qnb.backends is also a function
    current = registry.current_name() if hasattr(registry, "current_name") else None
    lines = []
    for info in qnb.backends():
        mark = "*" if info.name == current else " "
        state = info.device if info.available else f"unavailable: {info.reason}"
        lines.append(f"{mark} {info.name:<5} {state}")
    if current:
        lines.append(f"launches use {current!r}")
    return "\n".join(lines)
