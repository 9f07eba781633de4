"""``%%qkernel``, ``%qcache``, ``%qbackend``, ``%qbench`` and ``%qcompare``: a thin shell over qnb's
public API, in the manner of Cython's ``%%cython``.

A ``%%qkernel`` cell runs in the user namespace under its own file name (registered in
:mod:`linecache`), so kernels, errors and tracebacks point at the cell's own lines.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import importlib
import inspect
import itertools
import linecache
import os
import shlex
import traceback
import warnings

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

import qnb
from qnb.function import QnbFunction
from qnb.languages import LANGUAGES, spoken
from qnb.magics.bench import BENCH_FILENAME, bench
from qnb.magics.display import GeneratedSource, show_error
from qnb.viz.events import event_detail, status_line

REASON_CHARS = 80  # a status line's reason, at most (%qcache explain NAME has it all)

# Every %%qkernel cell file name given out in this process. Kernels, errors and traces
# keep their cell's name, so a name is never given twice: not after %reload_ext qnb
# (a new QnbMagics), not when a cell runs twice under one execution count.
_CELL_NAMES: set[str] = set()


def _is_kernel(value) -> bool:
    kernel_type = getattr(qnb, "Kernel", None)
    if kernel_type is not None:
        return isinstance(value, kernel_type)
    return hasattr(value, "is_fully_annotated") and hasattr(value, "compile")


@magics_class
class QnbMagics(Magics):
    # ----------------------------------------------------------------------------- qkernel

    @magic_arguments("%qkernel")  # the usage line reads "%%qkernel": a cell magic
    @argument(
        "-b",
        "--backend",
        help="backend for this cell's compiles and its kernels' default: cpu, wgpu, cuda or auto",
    )
    @argument(
        "--show",
        choices=list(LANGUAGES),
        action="append",
        default=[],
        help=f"show the generated code ({spoken(quote=False)}); may be repeated",
    )
    @argument(
        "--no-cache",
        action="store_true",
        help="the cell's kernels compile anew, whatever the kernel cache holds (their "
        "no_cache option; other kernels, and the environment, are left alone)",
    )
    @argument(
        "--cache-detail",
        "--trace",  # the contract's name (DESIGN.md); kernel.trace is the op trace
        dest="cache_detail",
        action="store_true",
        help="show each compile's cache outcome, its reason and the key components "
        "(--trace is the same; for an op-by-op trace use kernel.trace)",
    )
    @cell_magic
    def qkernel(self, line, cell):
        """Define kernels: every function the cell defines becomes a qnb kernel.

        Kernels whose parameters are all annotated compile at once, so errors show at the
        cell, as its own line with a caret. One status line per kernel says whether it
        was compiled, loaded from disk or found in memory, with its short cache key, and
        why, where a compile or a disk load was not the kernel's first in this process
        (what changed in its key, e.g. ``(captured.ALPHA: 2.0 → 3.0)``).

        The cell runs under the file name ``<qkernel-cell-In[N]>``, N its execution
        count (``-2``, ``-3``… follow where a name would be reused; a cell run without
        an In[N] of its own is ``<qkernel-cell-1>``, ``<qkernel-cell-2>``…).

        When a function's definition fails (an unsupported construct, say), its name is
        bound to a :class:`FailedDefinition`: calling or launching it raises the same
        error again, naming the cell's line, so the kernel an earlier run of the cell
        defined is never run by mistake. Fix the cell and run it again.

        Every kernel of the cell is compiled and gets its status line, a failed one
        too (what failed, and where); then the cell fails with the first error: one
        that stopped the cell's code, else the first failed definition or compile.
        """
        args = parse_argstring(self.qkernel, line)
        # Line 1 of the cell as the user sees it is "%%qkernel ...": a blank line in its
        # place keeps the line numbers of errors, tracebacks and traces the cell's own.
        cell = "\n" + cell
        filename = self._register_cell(cell)
        try:
            with self._cell_settings(args):
                ran = self._run_cell(cell, filename, args.backend, args.no_cache)
                failures = [ran.error] if ran.error is not None else []
                for name, value in ran.functions.items():
                    if isinstance(value, FailedDefinition):
                        print(_failure_line(name, "definition", value.error, filename))
                        failures.append(value.error)
                        continue
                    try:
                        self._compile_and_report(value, args)
                    except qnb.QnbError as err:
                        print(_failure_line(name, "compile", err, filename))
                        failures.append(err)
        except qnb.QnbError as err:
            raise _shown(err, filename) from None
        if failures:
            error = failures[0]
            raise _shown(error, filename) if isinstance(error, qnb.QnbError) else error
        return ran.result

    def _register_cell(self, cell: str) -> str:
        """A file name for the cell, never given before in this process, that says which
        cell it is: ``<qkernel-cell-In[N]>``, N the cell's execution count."""
        # The running cell's own count: shell.execution_count has moved on to the next.
        running = getattr(getattr(self.shell, "displayhook", None), "exec_result", None)
        count = getattr(running, "execution_count", None)
        counted = getattr(getattr(running, "info", None), "store_history", False)
        # The notebook, where IPython knows it (so `qnb cache list` over a cache shared by
        # several notebooks says whose In[7] a kernel came from): " of 01_first.ipynb".
        notebook = _notebook_name(self.shell)
        of = f" of {notebook}" if notebook else ""
        if counted and isinstance(count, int):
            names = (
                f"<qkernel-cell-In[{count}]{f'-{n}' if n > 1 else ''}{of}>"
                for n in itertools.count(1)
            )
        else:  # no In[N] to name
            names = (f"<qkernel-cell-{n}{of}>" for n in itertools.count(1))
        filename = next(n for n in names if n not in _CELL_NAMES and n not in linecache.cache)
        _CELL_NAMES.add(filename)
        # mtime None: linecache.checkcache keeps the entry (as for IPython's own cells).
        linecache.cache[filename] = (len(cell), None, cell.splitlines(keepends=True), filename)
        return filename

    @contextlib.contextmanager
    def _cell_settings(self, args):
        with contextlib.ExitStack() as stack:
            if args.backend:
                stack.enter_context(qnb.backend(args.backend))
            yield

    def _run_cell(self, cell: str, filename: str, backend: str | None, no_cache=False) -> _CellRun:
        """Run the cell in the user namespace; make its plain functions kernels (on
        ``backend`` by default, if given; ``no_cache``: each kernel of the cell takes
        nothing from the kernel cache). Returns the value of a final expression (shown
        as the cell's result), the kernels the cell defines and the error that stopped
        its code, if one did. A function whose definition fails is bound to a
        FailedDefinition (the kernels it defined before such an error are kept)."""
        tree = _compiled(ast.parse, cell, filename)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        namespace = self.shell.user_ns
        defined = [
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        # dont_inherit: this module's own `from __future__ import annotations` must not
        # turn the cell's annotations into strings.
        # compile() finds errors the parser does not (`def k(x, x):`, `return` at cell level).
        code = _compiled(compile, tree, filename, "exec", dont_inherit=True)
        failed = {}
        try:
            _run(code, namespace, filename, self.shell)
        except Exception as err:
            if isinstance(err, qnb.QnbError):  # a decorator (@qnb.kernel) refused its function
                name = _failed_definition(tree, err, filename, namespace)
                if name is not None:
                    failed[name] = namespace[name] = FailedDefinition(name, err)
                    show_error(err)  # at the definition: the line and caret say it all
            functions = _make_kernels(defined, namespace, filename, backend, failed, no_cache)
            return _CellRun(None, functions, err)  # (the kernels defined before the error)
        functions = _make_kernels(defined, namespace, filename, backend, failed, no_cache)
        result = None
        if last is not None and not failed:  # (it may use a function that failed)
            expression = ast.Expression(last.value)
            code = _compiled(compile, expression, filename, "eval", dont_inherit=True)
            try:
                result = _run(code, namespace, filename, self.shell)
            except Exception as err:
                return _CellRun(None, functions, err)
        return _CellRun(result, functions, None)

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
        specialization = kernel.specialize()
        event = specialization.compile()
        if event is None:
            print(f"{name}: compiled")
            return
        print(_status_line(event, name))
        if args.cache_detail:
            print("  " + event_detail(event).replace("\n", "\n  "))
        for language in args.show:
            display(GeneratedSource(name, language, specialization.source(language)))

    # ------------------------------------------------------------------------------ qcache

    @magic_arguments()
    @argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "stats", "clear", "explain"),
        help="list this process's cache events (default), show stats, clear this "
        "process's memory level (--disk: and the disk entries), or explain NAME",
    )
    @argument("name", nargs="?", help="for explain: a kernel (or its name)")
    @argument(
        "--disk",
        action="store_true",
        help="for clear: also delete every entry of the disk cache (shared by all processes)",
    )
    @line_magic
    def qcache(self, line):
        """The kernel cache: ``%qcache [list|stats|clear [--disk]|explain NAME]``.

        ``list`` shows this process's cache events (``qnb cache list`` in a shell shows
        the disk's entries); ``clear`` empties this process's memory level and keeps the
        disk cache, which other processes share; ``clear --disk`` deletes its entries too.
        Each says what it cleared."""
        args = parse_argstring(self.qcache, line)
        if args.name is not None and args.action != "explain":
            raise UsageError(
                f"%qcache {args.action} takes no argument (got {args.name!r}); "
                "only %qcache explain NAME does"
            )
        if args.disk and args.action != "clear":
            raise UsageError(f"%qcache {args.action} takes no --disk; only %qcache clear does")
        if args.action == "list":
            print(_event_table(qnb.cache.events()))
        elif args.action == "stats":
            print(_stats_table(qnb.cache.stats()))
        elif args.action == "clear":
            with warnings.catch_warnings():  # the failure is said here, once
                warnings.simplefilter("ignore", qnb.cache.CacheWarning)
                result = qnb.cache.clear(disk=args.disk)
            if result.failed:  # the cell fails, with the message only
                raise show_error(OSError(f"qnb kernel cache: {result}"))
            print(f"qnb kernel cache: {_clear_text(result)}")
        else:
            if not args.name:
                raise UsageError("%qcache explain needs a kernel name: %qcache explain NAME")
            target = self.shell.user_ns.get(args.name, args.name)
            if isinstance(target, FailedDefinition):  # then its name's history, if any
                print(_failure_line(args.name, "its last %%qkernel definition", target.error, ""))
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
        median time, and GB/s and GFLOP/s where bytes and flops are given (``--bytes``,
        ``--flops``) or, for a kernel launch ``k[grid](...)``, estimated from its array
        arguments (anything else is timed only). ``-o`` returns the :class:`BenchResult`
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
            raise _shown(err, BENCH_FILENAME) from None
        except SyntaxError as exc:
            raise UsageError(f"%qbench cannot parse {expr.strip()!r}: {exc.msg}") from None
        except Exception as exc:
            _from_frame_of(exc, BENCH_FILENAME, self.shell)
            raise
        print(result)
        return result if args.output else None

    # ---------------------------------------------------------------------------- qcompare

    @magic_arguments()
    @argument(
        "-b",
        "--backends",
        help="comma-separated backends to compare with cpu (default: every available one)",
    )
    @argument("-o", "--output", action="store_true", help="return the qnb.Comparison")
    @argument("expr", nargs="*", help="the launch expression, e.g. k[4, 4](a, b, c)")
    @line_magic
    def qcompare(self, line):
        """Compare a launch across backends: ``%qcompare [-b BACKEND,...] [-o] [--] EXPR``.

        Runs ``qnb.compare`` on EXPR (``k[grid](args)``: each backend on its own copy of
        the arguments), prints one line per backend, and shows ``CompareView`` when they
        differ. ``-o`` returns the ``qnb.Comparison``.
        """
        from qnb.magics.compare import COMPARE_FILENAME, report_lines, split_launch

        options, expr = _split_options(self.qcompare, line)
        if options is None:
            print(self.qcompare.parser.format_help())
            return None
        args = parse_argstring(self.qcompare, options)
        if not expr.strip():
            raise UsageError("%qcompare needs a launch expression, e.g. %qcompare k[4](x, out)")
        backends = None
        if args.backends:
            backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        try:
            launch, values = split_launch(expr, self.shell.user_ns)
            comparison = qnb.compare(launch, *values, backends=backends)
        except qnb.QnbError as err:
            raise _shown(err, COMPARE_FILENAME) from None
        except SyntaxError as exc:
            raise UsageError(f"%qcompare cannot parse {expr.strip()!r}: {exc.msg}") from None
        except ValueError as exc:
            if _frames_from(exc.__traceback__, COMPARE_FILENAME) is not None:
                raise _shown(exc, COMPARE_FILENAME) from None  # (raised by their code)
            raise UsageError(f"%qcompare: {exc}") from None
        except Exception as exc:  # an error of the user's own expression (a NameError…)
            if _frames_from(exc.__traceback__, COMPARE_FILENAME) is None:
                raise
            raise _shown(exc, COMPARE_FILENAME) from None
        for text in report_lines(comparison):
            print(text)
        if not comparison.equal:
            from qnb.viz import CompareView

            display(CompareView(comparison))
        return comparison if args.output else None


@dataclasses.dataclass
class _CellRun:
    """What running a %%qkernel cell's code gave: the final expression's value, the
    cell's kernels and failed definitions by name (in the cell's order), and the error
    that stopped the code, if one did."""

    result: object
    functions: dict
    error: Exception | None


class FailedDefinition(QnbFunction):
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
    source = compile = specialize = _raise

    @property
    def trace(self):
        self._raise()

    @property
    def parsed(self):
        """What a kernel (or func) that reads this name asks for, to compile it or to
        see whether it changed (``parsed`` or ``captures``): the error says this
        function's definition failed, at its own line, rather than that a kernel cannot
        capture a FailedDefinition."""
        err = self.error
        raise qnb.QnbCaptureError(
            f"a kernel reads {self.name!r}, whose last %%qkernel definition failed "
            f"({type(err).__name__}: {_first_line(err)}): fix that cell and run it again",
            err.filename,
            err.lineno,
            err.col,
            err.source_line,
        ) from err

    captures = parsed

    def __repr__(self) -> str:
        err = self.error
        where = f", {err.filename} line {err.lineno}" if err.lineno is not None else ""
        return f"<{self.name}: definition failed ({type(err).__name__}{where})>"


def _make_kernels(names, namespace, filename, backend, failed, no_cache=False) -> dict:
    """Make the cell's plain functions ``names`` kernels (on ``backend`` by default, if
    given; ``no_cache``: set on each, decorated ones too). Returns the cell's kernels and
    failed definitions (``failed``, and those of the functions that could not be made
    kernels, now bound to a FailedDefinition) by name, in the cell's order; names the
    cell's code did not reach are left out."""
    functions = {}
    for name in dict.fromkeys(names):
        value = namespace.get(name)
        if name in failed:
            functions[name] = failed[name]
            continue
        if not _defined_in(value, filename):  # a def the cell did not reach: an older value
            continue
        if inspect.isfunction(value):
            chosen = backend if backend != "auto" else None
            try:
                value = namespace[name] = qnb.kernel(value, backend=chosen)
            except qnb.QnbError as err:
                functions[name] = namespace[name] = FailedDefinition(name, err)
                show_error(err)  # at the definition: the line and caret say it all
                continue
        if _is_kernel(value):
            if backend and value.backend is None:
                value.backend = backend  # -b is the default of decorated kernels too
            if no_cache:
                value.no_cache = True
            functions[name] = value
    return functions


def _defined_in(value, filename: str) -> bool:
    """Whether ``value`` is a function (or a kernel or func of one) defined in ``filename``."""
    function = getattr(value, "__wrapped__", value)  # a kernel's or func's own
    code = getattr(function, "__code__", None)
    return code is not None and code.co_filename == filename


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
            return None if _defined_in(namespace.get(node.name), filename) else node.name
    return None


def _first_line(err: Exception) -> str:
    """The first line of an error's message (a qnb error's, without its location)."""
    message = err.message if isinstance(err, qnb.QnbError) else str(err)
    return (message.splitlines() or [""])[0]


def _failure_line(name: str, what: str, err: Exception, filename: str) -> str:
    """A status line for a kernel whose definition or compile failed: the error's type,
    first line and line (and cell, if another one's)."""
    where = ""
    if getattr(err, "lineno", None) is not None:
        where = f" (line {err.lineno})"
        if err.filename != filename:
            where = f" ({err.filename} line {err.lineno})"
    return f"{name}: {what} failed: {type(err).__name__}: {_first_line(err)}{where}"


def _shown(err: Exception, filename: str) -> Exception:
    """``err`` as IPython should show it. One that came through the user's code run in
    ``filename`` (a launch in the cell, the %qbench or %qcompare expression, a function
    of theirs it calls) keeps its own rendering: the user's frames, then the error and
    its caret, as in a plain cell. Any other qnb error (a definition, a compile, an
    option: nothing of theirs ran) shows as its message and caret only."""
    if "_render_traceback_" in vars(err):  # (said how to show it already)
        return err
    if _frames_from(err.__traceback__, filename) is None:
        return show_error(err)
    own = getattr(type(err), "_render_traceback_", None) or _python_rendering

    def render() -> list[str]:
        # From the cell's (or expression's) own frame on: not the frame of the IPython
        # cell that calls the magic (get_ipython().run_cell_magic(...)).
        whole = err.__traceback__
        try:
            return own(err.with_traceback(_frames_from(whole, filename)))
        finally:
            err.__traceback__ = whole

    err._render_traceback_ = render
    return err


def _python_rendering(err: Exception) -> list[str]:
    """Python's own rendering of ``err`` from its traceback (an error that is not qnb's)."""
    return "".join(traceback.format_exception(type(err), err, err.__traceback__)).splitlines()


def _frames_from(tb, filename: str):
    """The traceback ``tb`` from its first frame in ``filename`` on (None: none is)."""
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return tb


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
    if event.outcome == "miss" and str(event.reason).startswith("first compile on "):
        return event.reason  # the other backend's whole key differs: nothing to list
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


def _compiled(parse_or_compile, *args, **kwargs):
    """``ast.parse`` or ``compile`` of a cell. IPython would print a SyntaxError with this
    module's frames: as a qnb error (no traceback) it shows as the cell's line and a
    caret, like every other error in a kernel."""
    try:
        return parse_or_compile(*args, **kwargs)
    except SyntaxError as err:
        col = err.offset - 1 if err.offset else None
        filename = err.filename or args[1]
        error = qnb.QnbSyntaxError(err.msg, filename, err.lineno, col)
    raise error


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
    tb = _frames_from(exc.__traceback__, filename)
    if tb is not None:
        with contextlib.suppress(AttributeError):
            exc._render_traceback_ = functools.partial(
                shell.InteractiveTB.structured_traceback, type(exc), exc, tb
            )


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


def _clear_text(result) -> str:
    """What ``%qcache clear`` did, and where it kept the disk entries, how many."""
    if result.disk:
        return str(result)
    entries = qnb.cache.stats()["disk_entries"]
    kept = f"{entries} entr{'y' if entries == 1 else 'ies'}"
    return f"{result}: {kept} there (%qcache clear --disk deletes them, for every process)"


def _stats_table(stats: dict) -> str:
    """``qnb.cache.stats()`` one per line, seconds to the millisecond."""
    width = max(len(k) for k in stats) if stats else 0
    return "\n".join(
        f"{key:<{width}}  {round(value, 3) if isinstance(value, float) else value}"
        for key, value in stats.items()
    )


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


def _notebook_name(shell) -> str | None:
    """The running notebook's file name, where the front end told the kernel: VS Code's
    ``__vsc_ipynb_file__`` in the user namespace, Jupyter Server's ``JPY_SESSION_NAME``
    (its path) or IPython's ``__session__``; None in a plain IPython or a headless run."""
    user = getattr(shell, "user_ns", None) or {}
    for value in (
        user.get("__vsc_ipynb_file__"),
        os.environ.get("JPY_SESSION_NAME"),
        user.get("__session__"),
    ):
        if isinstance(value, str) and value.endswith(".ipynb"):
            return os.path.basename(value)
    return None
