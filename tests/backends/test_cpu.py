"""The cpu backend against independent NumPy references, every suite kernel at every dtype
it supports. Outputs are poisoned first, so an element the kernel fails to write shows."""

import numpy as np
import pytest

from tests.suite import CASES, run_case, tolerance

PAIRS = [(c, np.dtype(d)) for c in CASES for d in c.dtypes]


@pytest.mark.parametrize("case,dtype", PAIRS, ids=[f"{c.name}-{d}" for c, d in PAIRS])
def test_case_matches_numpy_reference(case, dtype):
    args, expected = run_case(case, dtype, "cpu")
    for index, want in expected.items():
        got = args[index]
        assert got.dtype == want.dtype
        assert not (np.isnan(got) & ~np.isnan(want)).any() if got.dtype.kind == "f" else True, (
            "an output element was never written"
        )
        rtol, atol = tolerance(got.dtype, case.name)
        np.testing.assert_allclose(
            got.astype(np.float64),
            want.astype(np.float64),
            rtol=rtol,
            atol=atol,
            err_msg=f"output argument {index}",
        )


def test_aligned_fast_paths_match_numpy():
    """Arrays that are whole 16×16 blocks take the block-gather paths (whole grid, one
    shared block row/column, arbitrary blocks): each must agree with NumPy."""
    import qnb
    from tests.suite import copy_tiles, tiled_matmul

    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (64, 48)).astype(np.float32)
    b = rng.uniform(-1, 1, (48, 32)).astype(np.float32)
    c = np.full((64, 32), np.nan, np.float32)
    with qnb.backend("cpu"):
        tiled_matmul[(4, 2)](a, b, c)  # shared k column of a, shared k row of b
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
        dst = np.full_like(a, np.nan)
        copy_tiles[(4, 3)](a, dst)  # the grid tiles the array exactly
        np.testing.assert_array_equal(dst, a)
        dst = np.full((64, 64), np.nan, np.float32)
        big = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
        copy_tiles[(2, 3)](big, dst)  # a partial grid: arbitrary blocks
        np.testing.assert_array_equal(dst[:32, :48], big[:32, :48])
        assert np.isnan(dst[32:]).all() and np.isnan(dst[:, 48:]).all()
