"""Every error path of the front end: the right qnb error type, the user's own line and
column, a message that says what to do, and never an internal exception."""

import textwrap

import numpy as np
import pytest

import qnb
from qnb import Tile16, Vec16  # noqa: F401
from tests.helpers import define


def decorate(source, namespace=None):
    scope, filename = define(source, namespace)
    return scope, filename


def line_of(source: str, needle: str) -> int:
    for number, line in enumerate(textwrap.dedent(source).splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(needle)


UNSUPPORTED = [
    ("lambda", "    f = lambda v: v\n"),
    ("list comprehensions", "    xs = [v for v in range(3)]\n"),
    ("try/except", "    try:\n        pass\n    except Exception:\n        pass\n"),
    ("with", "    with open('f') as fh:\n        pass\n"),
    ("nested functions", "    def inner():\n        pass\n"),
    ("import", "    import os\n"),
    ("f-strings", "    name = f'{x}'\n"),
    ("dicts", "    d = {1: 2}\n"),
    ("assert", "    assert True\n"),
    ("raise", "    raise ValueError()\n"),
    ("global", "    global G\n"),
    ("del", "    del x\n"),
]


@pytest.mark.parametrize("what,body", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_constructs_raise_at_decoration_with_line(what, body):
    source = "@qnb.kernel\ndef k(x):\n    t = Tile16.zeros()\n" + body
    with pytest.raises(qnb.QnbSyntaxError) as info:
        define(source)
    err = info.value
    assert what in err.message
    assert err.lineno in (4, 5) and err.filename.startswith("<test-cell-")
    rendered = str(err)
    assert body.splitlines()[0].strip() in rendered and "^" in rendered


@pytest.mark.parametrize(
    "expr,message",
    [
        ("t[:] = x[:16, 0:16]", "start and stop indices are required"),
        ("t[:] = x[0:16, 0:]", "start and stop indices are required"),
        ("x[0:16, :] = t", "start and stop indices are required"),
        ("t[:] = x[-1:15, 0:16]", "Negative indices"),
        ("x[0:16, 0:-16] = t", "Negative indices"),
        ("t[:] = x[0:16:2, 0:16]", "step"),
    ],
)
def test_malformed_slices(expr, message):
    source = f"@qnb.kernel\ndef k(x):\n    t = Tile16.zeros()\n    {expr}\n"
    with pytest.raises(qnb.QnbSyntaxError, match=message) as info:
        define(source)
    assert info.value.lineno == 4
    assert info.value.col is not None and info.value.col > 4


def test_signature_errors():
    with pytest.raises(qnb.QnbSyntaxError, match=r"\*args"):
        define("@qnb.kernel\ndef k(*xs):\n    pass\n")
    with pytest.raises(qnb.QnbSyntaxError, match="default"):
        define("@qnb.kernel\ndef k(x=1):\n    pass\n")


def launch_error(source, *args, namespace=None, grid=1, error=qnb.QnbError, at_launch=False):
    """The error of launching kernel ``k`` of ``source``: located in the kernel's own cell,
    or (``at_launch``: an error of the launch as a whole) at the launch line below."""
    scope, filename = define(source, namespace)
    with pytest.raises(error) as info, qnb.backend("cpu"):
        scope["k"][grid](*args)  # the launch line
    err = info.value
    if at_launch:
        assert (err.filename, err.source_line.strip()) == (
            __file__,
            'scope["k"][grid](*args)  # the launch line',
        ), err
    else:
        assert err.filename == filename, f"error not located in the kernel's own cell: {err!r}"
    assert err.lineno is not None
    return err


F32_2D = np.ones((16, 16), np.float32)


def test_annotated_dtype_mismatch_names_parameter():
    err = launch_error(
        "@qnb.kernel\ndef k(x: qnb.Array[qnb.f32, 2]):\n    pass\n",
        np.ones((4, 4)),
        error=qnb.QnbTypeError,
    )
    assert "'x'" in err.message and "f32" in err.message and "f64" in err.message
    assert isinstance(err, TypeError)


def test_annotated_ndim_mismatch():
    err = launch_error(
        "@qnb.kernel\ndef k(x: qnb.Array[qnb.f32, 2]):\n    pass\n",
        np.ones(4, np.float32),
        error=qnb.QnbTypeError,
    )
    assert "2-D" in err.message


def test_arity_and_array_problems():
    source = "@qnb.kernel\ndef k(x, y):\n    pass\n"
    arity = launch_error(source, F32_2D, error=qnb.QnbTypeError, at_launch=True)
    assert "takes 2 arguments" in arity.message
    err = launch_error(source, F32_2D[:, ::2], F32_2D, error=qnb.QnbTypeError)
    assert "contiguous" in err.message and "ascontiguousarray" in err.message
    err = launch_error(source, np.ones(3, np.int64), F32_2D, error=qnb.QnbTypeError)
    assert "int64" in err.message and "astype" in err.message
    err = launch_error(source, [1, 2], F32_2D, error=qnb.QnbTypeError)
    assert "list" in err.message
    err = launch_error(
        "@qnb.kernel\ndef k(x, s: qnb.f32):\n    pass\n", F32_2D, F32_2D, error=qnb.QnbTypeError
    )
    assert "'s' is a f32 scalar; got an array" in err.message
    err = launch_error(
        source, F32_2D, F32_2D, grid=(2**31, 1), error=qnb.QnbTypeError, at_launch=True
    )
    assert "below 2**31" in err.message


def test_keyword_argument_problems_name_the_parameters():
    scope, _ = define("@qnb.kernel\ndef k(x, y):\n    pass\n")
    k = scope["k"]
    for call, message in (
        (lambda: k(F32_2D, z=F32_2D), "has no parameter 'z'"),
        (lambda: k(F32_2D, x=F32_2D), "'x' both by position and by name"),
        (lambda: k[2](y=F32_2D), "is missing 'x'"),
        (lambda: k.trace[1](F32_2D, w=1), "has no parameter 'w'"),
    ):
        with pytest.raises(qnb.QnbTypeError) as info:
            call()
        # an error of the call as a whole is at the caller's line (here: this file's)
        assert message in info.value.message and info.value.filename == __file__
        assert info.value.lineno == call.__code__.co_firstlineno


def test_capture_of_array_is_refused_with_fix():
    data = np.zeros(3)
    err = launch_error(
        "@qnb.kernel\ndef k(out):\n    out[0] = data[0]\n",
        np.zeros(3),
        namespace={"data": data},
        error=qnb.QnbCaptureError,
    )
    assert err.message == (
        "kernel 'k' reads 'data' (numpy.ndarray) from the enclosing scope; pass it as a parameter"
    )
    assert err.lineno == 3


def test_capture_of_plain_function_says_decorate():
    err = launch_error(
        "@qnb.kernel\ndef k(out):\n    out[0] = helper(1)\n",
        np.zeros(3),
        namespace={"helper": lambda v: v},
        error=qnb.QnbCaptureError,
    )
    assert "@qnb.func" in err.message


@pytest.mark.parametrize(
    "body,args,message,error",
    [
        (
            "    L = Tile16.eye()\n    B = Tile16.eye()\n    L.solve_triangular_(B, lower=False)\n",
            (),
            "only lower=True",
            qnb.QnbTypeError,
        ),
        (
            "    t = Tile16.zeros()\n    v = qnb.Vec[8].zeros()\n    u = t + v\n",
            (),
            "a Tile16 and a Vec[8] do not broadcast",
            qnb.QnbTypeError,
        ),
        ("    t = Tile16.zeros()\n    if t:\n        pass\n", (), "truth value", qnb.QnbTypeError),
        ("    y = undefined_name + 1\n", (), "not defined", qnb.QnbTypeError),
        (
            "    t = qnb.Tile[8, 16].zeros(qnb.f64)\n    t.cholesky_()\n",
            (),
            "square",
            qnb.QnbTypeError,
        ),
        ("    n = 2\n    d = x.shape[n]\n", (F32_2D,), "constant", qnb.QnbTypeError),
        ("    t = Tile16.zeros()\n    (t + 1).eye_()\n", (), "variable", qnb.QnbTypeError),
        (
            "    t = Tile16.zeros()\n    if qnb.program_id(0) > 0:\n        t = 1.0\n",
            (),
            "keeps its type there",
            qnb.QnbTypeError,
        ),
        (
            "    t = Tile16.zeros(qnb.i32)\n    t.cholesky_()\n",
            (),
            "float Tile16",
            qnb.QnbTypeError,
        ),
        ("    for i in (1, 2):\n        pass\n", (), "range", qnb.QnbSyntaxError),
        ("    t = Tile16.zeros()\n    t.store(x, 0)\n", (F32_2D,), "store", qnb.QnbTypeError),
        ("    v = qnb.static(x)\n", (F32_2D,), "compile-time", qnb.QnbTypeError),
        ("    t = Tile16.full('a')\n", (), "number", qnb.QnbTypeError),
        ("    t = Tile16.zeros(qnb.f64)\n    u = t @ Vec16.zeros()\n", (), "@", qnb.QnbTypeError),
        ("    y = x[0, 0, 0]\n", (F32_2D,), "2 indices", qnb.QnbTypeError),
        (
            "    x[0] = 1.0\n",
            (np.zeros((2, 16, 16), np.float32),),
            "x[b, i, j], got 1 index",
            qnb.QnbTypeError,
        ),
        (
            "    y = x[0, 1]\n",
            (np.zeros((2, 16, 16), np.float32),),
            "a 3-D array needs 3 indices, got 2",
            qnb.QnbTypeError,
        ),
        ("    t = Tile16.zeros()\n    y = t[0]\n", (), "indexed with 2", qnb.QnbTypeError),
        ("    y = 2**40\n    z = y + qnb.program_id(0)\n", (), "i32", qnb.QnbTypeError),
        ("    t = Tile16.zeros(qnb.f32)\n    u = t.nope()\n", (), "nope", qnb.QnbTypeError),
        ("    y = qnb.program_id(5)\n", (), "axis", qnb.QnbTypeError),
    ],
)
def test_type_errors_at_first_launch(body, args, message, error):
    params = "x" if args else ""
    source = f"@qnb.kernel\ndef k({params}):\n{body}"
    err = launch_error(source, *args, error=error)
    assert message in err.message, err.message
    assert 2 <= err.lineno <= 2 + body.count("\n")
    assert "^" in str(err)


def test_index_errors_on_cpu_name_the_line():
    source = "@qnb.kernel\ndef k(x):\n    i = qnb.program_id(0)\n    x[i, 0] = 1.0\n"
    err = launch_error(source, F32_2D, grid=20, error=qnb.QnbIndexError)
    assert err.lineno == 4 and isinstance(err, IndexError)
    assert "program (16, 0, 0)" in err.message
    source = (
        "@qnb.kernel\ndef k(x):\n    r = qnb.program_id(0) - 1\n    t = Tile16.zeros()\n"
        "    t[:] = x[r:r + 16, 0:16]\n"
    )
    err = launch_error(source, F32_2D, grid=2, error=qnb.QnbIndexError)
    assert "negative" in err.message and err.lineno == 5
    source = "@qnb.kernel\ndef k(x):\n    t = Tile16.zeros()\n    x[0, 0] = t[qnb.program_id(0) + 15, 0]\n"
    err = launch_error(source, F32_2D, grid=2, error=qnb.QnbIndexError)
    assert "0..15" in err.message


def test_error_in_func_points_into_the_func():
    scope, _filename = define("""
        @qnb.func
        def helper(t):
            return t + qnb.Vec[8].zeros()  # Tile16 + Vec[8] do not broadcast

        @qnb.kernel
        def k(x):
            t = Tile16.zeros()
            u = helper(t)
        """)
    with pytest.raises(qnb.QnbTypeError) as info, qnb.backend("cpu"):
        scope["k"](F32_2D)
    assert info.value.lineno == 4  # the line inside helper


def test_unknown_backend():
    with pytest.raises(qnb.BackendError, match="unknown backend"):
        qnb.set_backend("tpu")
    with pytest.raises(qnb.BackendError), qnb.backend("metal"):
        pass


def test_bad_grid():
    scope, _ = define("@qnb.kernel\ndef k():\n    pass\n")
    with pytest.raises(qnb.QnbTypeError, match="grid"):
        scope["k"][(1, 2, 3, 4)]()
    with pytest.raises(qnb.QnbTypeError, match="at least 1"):
        scope["k"][0]()


GARBAGE = [
    "x[0, 0] = qnb.where",
    "t = Tile16.load(x)",
    "t = Tile16.load(1, 2, 3)",
    "t = Tile16.zeros(dtype='nope')",
    "t = Tile16.zeros(); t.load_(x, 0, 1)",
    "v = Vec16.load(x, 0)",
    "t = Tile16.zeros(); s = t.sum(axis=3)",
    "t = Tile16.zeros(); u = t.row(1, 2)",
    "y = qnb.mma(1, 2, 3)",
    "y = qnb.outer(x, x)",
    "y = x + 1",
    "y = (1, 2) * x[0, 0]",
    "y = qnb.static(1 / 0)",
    "y = qnb.exp('a')",
    "y = x.shape",
    "y = x.nothing",
    "qnb.program_id(0)()",
    "y = qnb.Tile16.zeros().T.T.row(0)[20]",
    "y = Tile16.SIZE[0]",
    "t = Tile16.zeros(); t[0, 0, 0] = 1",
    "x[0:16, 0:16] = 1.0",
    "t = Tile16.zeros(); t[:] = 5",
    "y = max(1)",
    "y = len(1)",
    "y = int('3')",
    "y = range(3)",
    "y = -Tile16.zeros(qnb.bool_)",
    "y = ~Tile16.zeros()",
    "y = qnb.where(x, 1, 2)",
    "for i in qnb.static(5):\n        pass",
    "while Tile16.zeros():\n        pass",
    "a, b = 1",
    "t = Tile16.zeros(); t.solve_triangular_(Tile16.zeros())",
]


@pytest.mark.parametrize("line", GARBAGE)
def test_malformed_kernels_raise_only_qnb_errors(line):
    source = f"@qnb.kernel\ndef k(x):\n    {line}\n"
    try:
        scope, _ = define(source)
        with qnb.backend("cpu"):
            scope["k"](F32_2D)
    except qnb.QnbError as err:
        assert err.lineno is not None, f"{err!r} has no location"
    # a line that is valid is fine too: the point is that nothing else escapes


def test_func_arity_error_counts_in_words():
    scope, _ = define("""
        @qnb.func
        def helper(t):
            return t

        @qnb.kernel
        def k(x):
            x[0, 0] = helper(1.0, 2.0)
        """)
    with pytest.raises(qnb.QnbTypeError) as info:
        scope["k"](np.zeros((16, 16), np.float32))
    assert "helper() takes 1 argument but 2 were given" in info.value.message
    assert info.value.lineno == 8


def test_what_the_decorators_take():
    with pytest.raises(qnb.QnbTypeError, match="decorate a Python function, not int"):
        qnb.kernel(3)
    with pytest.raises(qnb.QnbTypeError, match="not builtin_function_or_method"):
        qnb.func(len)
    with pytest.raises(qnb.QnbSyntaxError, match="with def, not lambda"):
        qnb.kernel(lambda x: x)
    with pytest.raises(qnb.BackendError, match="unknown backend 'nope'") as info:
        define("@qnb.kernel(backend='nope')\ndef k(x):\n    pass\n")
    assert info.value.lineno == 2


@pytest.mark.parametrize(
    ("array", "message"),
    [
        ("abc", "dtype <U3"),
        (np.zeros(3, np.int64), "dtype int64"),
        (np.zeros((1, 1, 1, 1), np.float32), "not 4-D"),
        (np.float32(2), "not 0-D"),
    ],
)
def test_to_device_refuses_what_no_kernel_takes(array, message):
    with pytest.raises(qnb.QnbTypeError, match=message), qnb.backend("cpu"):
        qnb.to_device(array)


def test_ipython_shows_the_users_frames_and_the_kernel_line_not_qnbs():
    # In a notebook a launch error shows the cell's own calls, then the error at the
    # kernel line with its caret: none of qnb's (or IPython's) frames.
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    ip = InteractiveShell.instance()  # (the one shell of the test process)
    ip.run_cell(
        "import numpy as np, qnb\nfrom qnb import Tile16\n@qnb.kernel\n"
        "def k(x: qnb.Array[qnb.f32, 2]):\n    Tile16.load(x, 0, 0).store(x, 0, 0)\n"
        "def helper(a):\n    k(a)\n"
    )
    with capture_output() as shown:
        result = ip.run_cell("helper(np.zeros((16, 16), np.int32))")
    assert isinstance(result.error_in_exec, qnb.QnbTypeError)
    text = shown.stdout + shown.stderr
    assert "in helper" in text and "k(a)" in text  # the user's own frames
    assert "qnb.QnbTypeError: array 'x' must be f32" in text
    assert "def k(x: qnb.Array[qnb.f32, 2]):" in text and "^" in text
    assert "qnb/kernel.py" not in text and "interactiveshell" not in text


ERROR_TYPES = [
    qnb.QnbError,
    qnb.QnbSyntaxError,
    qnb.QnbTypeError,
    qnb.QnbCaptureError,
    qnb.QnbIndexError,
    qnb.BackendError,
    qnb.CompileError,
]


@pytest.mark.parametrize("kind", ERROR_TYPES, ids=lambda kind: kind.__name__)
def test_location_fields_are_declared_on_every_error(kind):
    # The fields a backend fills in before the kernel places an error in the user's file:
    # declared on QnbError, None until set (read as attributes, never with getattr).
    err = kind("message")
    assert (err.ir_loc, err.ir_unit, err.param) == (None, None, None)
    assert {"ir_loc", "ir_unit", "param"} <= set(qnb.QnbError.__annotations__)
