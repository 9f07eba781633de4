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
