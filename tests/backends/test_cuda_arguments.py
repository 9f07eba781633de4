"""The cuda launcher's argument marshalling, on any machine.

``cuda._launch_arguments`` turns a launch's arguments into the kernel's parameters (the
ABI of ``cuda_render``): a device pointer and one i32 per dimension for an array, the
scalar in its ABI type, and it checks each array. It runs before CuPy ever sees a launch,
so it is tested here with a stand-in for ``cupy.ndarray`` (CuPy cannot make an array
without a GPU); the GPU tests in test_cuda.py launch for real.
"""

import types

import numpy as np
import pytest

import qnb
from qnb.backends import cuda


class _DeviceArray:  # what _launch_arguments reads of a cupy.ndarray
    def __init__(self, shape, dtype, contiguous=True):
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)
        self.flags = types.SimpleNamespace(c_contiguous=contiguous)


CUPY = types.SimpleNamespace(ndarray=_DeviceArray)
ABI = [
    {"name": "x", "kind": "array", "dtype": "f32", "ndim": 2, "stored": True},
    {"name": "alpha", "kind": "scalar", "dtype": "f16", "pass_as": "float32"},
    {"name": "n", "kind": "array", "dtype": "i32", "ndim": 1, "stored": False},
]
PLAN = cuda._argument_plan(ABI)


def test_arrays_become_a_pointer_and_i32_dims_and_scalars_their_abi_type():
    x, n = _DeviceArray((40, 50), np.float32), _DeviceArray((7,), np.int32)
    words = cuda._Words()
    values, host = cuda._launch_arguments(PLAN, [x, 2.5, n], CUPY, words)
    assert values[0] is x and values[4] is n and not host.stored  # nothing to write back
    assert [type(v) for v in values[1:4] + values[5:]] == [np.int32, np.int32, np.float32, np.int32]
    assert [int(v) for v in (values[1], values[2], values[5])] == [40, 50, 7]
    assert float(values[3]) == 2.5
    again, _ = cuda._launch_arguments(PLAN, [x, 2.5, n], CUPY, words)
    assert again[1] is values[1]  # a shape's words are made once


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (((40, 50), np.float64), "parameter 'x': expected a 2-D float32 array, got 2-D float64"),
        (((40, 50, 2), np.float32), "expected a 2-D float32 array, got 3-D"),
        (((2**31, 2), np.float32), "array 'x' has a dimension of 2147483648"),
    ],
)
def test_a_wrong_array_is_refused_by_its_parameter(args, message):
    with pytest.raises(qnb.QnbTypeError, match=message) as info:
        cuda._launch_arguments(PLAN, [_DeviceArray(*args), 1.0, _DeviceArray((3,), np.int32)],
                               CUPY, cuda._Words())  # fmt: skip
    assert info.value.param == "x"


def test_a_strided_device_array_and_a_foreign_object_are_refused():
    strided = _DeviceArray((16, 16), np.float32, contiguous=False)
    with pytest.raises(qnb.QnbTypeError, match="not C-contiguous"):
        cuda._launch_arguments(
            PLAN, [strided, 1.0, _DeviceArray((3,), np.int32)], CUPY, cuda._Words()
        )
    with pytest.raises(qnb.QnbTypeError, match="cannot pass list to the cuda backend"):
        cuda._launch_arguments(
            PLAN, [[1.0], 1.0, _DeviceArray((3,), np.int32)], CUPY, cuda._Words()
        )


def test_numpy_views_are_not_refused_before_their_copy_when_read_only():
    from qnb.backends.host_arrays import memory_key, refuse_partial_overlap

    a = np.zeros(6, np.float32)
    assert memory_key(a) == memory_key(a[:]) != memory_key(a[1:])
    refuse_partial_overlap("cuda", [("x", a[:-1], False), ("y", a[1:], False)])  # reads only
    with pytest.raises(qnb.BackendError, match="overlapping parts") as info:
        refuse_partial_overlap("cuda", [("x", a[:-1], False), ("y", a[1:], True)])
    assert info.value.param == "y"


def test_the_plan_is_named_records_of_the_abi():
    x, alpha, n = PLAN
    assert [type(step) for step in PLAN] == [
        cuda.ArrayArgument,
        cuda.ScalarArgument,
        cuda.ArrayArgument,
    ]
    assert (x.name, x.dtype, x.ndim, x.stored) == ("x", np.dtype(np.float32), 2, True)
    assert (alpha.name, alpha.pass_as) == ("alpha", np.float32)
    assert (n.name, n.dtype, n.ndim, n.stored) == ("n", np.dtype(np.int32), 1, False)


def test_each_scalar_dtype_passes_as_its_c_type_and_numpy_dtype():
    from qnb.backends.cuda_render import SCALAR_ABI

    assert SCALAR_ABI["f64"].c_type == "double" and SCALAR_ABI["f64"].pass_as == "float64"
    assert {d: p.pass_as for d, p in SCALAR_ABI.items() if p.c_type == "int"} == {
        "i32": "int32",
        "bool": "int32",
    }
