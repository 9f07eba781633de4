"""Host-array marshalling (qnb/backends/host_arrays.py), the one every device launcher uses:
one device copy per memory, one write-back per stored memory, overlapping parts refused.

The rules are checked on ``HostArrays`` itself (with NumPy copies for the device, so each
copy in and back can be counted) and through a real launch on every backend.
"""

import numpy as np
import pytest

import qnb
from qnb.backends.host_arrays import HostArrays
from tests.helpers import define


class _NumpyDevice:
    """A device whose memory is NumPy copies: records every copy in and back."""

    def __init__(self):
        self.copied_in, self.copied_back = [], []

    def copy_in(self, name, array):
        self.copied_in.append(name)
        return array.copy()

    def copy_back(self, array, copy):
        self.copied_back.append(copy)
        array[...] = copy


def _arrays():
    device = _NumpyDevice()
    return device, HostArrays("test", device.copy_in, device.copy_back)


def test_each_memory_is_copied_in_once():
    device, host = _arrays()
    x, y = np.zeros(4, np.float32), np.zeros(4, np.float32)
    first = host.add("a", x, False)
    assert host.add("b", x, True) is first  # the same array
    assert host.add("c", x[:], False) is first  # a view of all of it
    assert host.add("d", y, False) is not first
    host.check()
    assert device.copied_in == ["a", "d"]


def test_a_stored_memory_is_written_back_once_whichever_parameter_stores():
    device, host = _arrays()
    x = np.zeros(4, np.float32)
    copy = host.add("a", x, True)
    host.add("b", x[:], True)
    copy[0], copy[1] = 1.0, 2.0  # the kernel's stores through a and b
    host.check()
    host.write_back()
    assert len(device.copied_back) == 1
    np.testing.assert_array_equal(x, [1, 2, 0, 0])


def test_only_stored_nonempty_arrays_are_written_back():
    device, host = _arrays()
    read, empty, stored = np.ones(3), np.zeros(0), np.zeros(3)
    host.add("read", read, False)
    host.add("empty", empty, True)
    host.add("stored", stored, True)[:] = 7.0
    host.write_back()
    assert len(device.copied_back) == 1
    np.testing.assert_array_equal(stored, [7, 7, 7])
    np.testing.assert_array_equal(read, [1, 1, 1])


def test_overlapping_parts_are_refused_only_where_one_is_stored():
    a = np.zeros(6, np.float32)
    _, host = _arrays()
    host.add("x", a[:-1], False)
    host.add("y", a[1:], False)
    host.check()  # two reads of overlapping parts are fine
    _, host = _arrays()
    host.add("x", a[:-1], False)
    host.add("y", a[1:], True)
    with pytest.raises(qnb.BackendError, match="'x' and 'y' are overlapping parts") as info:
        host.check()
    assert info.value.param == "y"


def test_a_read_only_array_is_refused_where_it_is_stored():
    device, host = _arrays()
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    host.add("x", frozen, False)  # reading it is fine
    with pytest.raises(qnb.QnbTypeError, match="read-only") as info:
        host.add("y", frozen, True)
    assert info.value.param == "y"
    assert device.copied_in == ["x"]


KERNELS, _ = define("""
    @qnb.kernel
    def store_through_both(a, b):
        a[0] = 1.0
        b[1] = 2.0

    @qnb.kernel
    def read_both(x, y, out):
        out[0] = x[0]
        out[1] = y[0]
    """)


@pytest.mark.parametrize("second", ["same", "view"])
def test_two_stores_to_one_memory_both_arrive(backend_name, second):
    # Two device copies, or two write-backs of one copy, would lose one of the stores.
    x = np.zeros(4, np.float32)
    with qnb.backend(backend_name):
        KERNELS["store_through_both"](x, x if second == "same" else x[:])
    np.testing.assert_array_equal(x, [1, 2, 0, 0])


def test_overlapping_parts_that_are_only_read_run(backend_name):
    a = np.arange(1, 7, dtype=np.float32)
    out = np.full(2, np.nan, np.float32)
    with qnb.backend(backend_name):
        KERNELS["read_both"](a[:-1], a[1:], out)
    np.testing.assert_array_equal(out, [1, 2])
