"""``qnb.compare`` names a race between programs only where ``qnb.check`` finds one: where a
backend's arrays differ although the probed program's steps all agree, the reason it
gives comes from ``qnb.check`` (``compare._where_else``)."""

from __future__ import annotations

import importlib

import numpy as np

from tests.hazards.planted import last_writer_wins
from tests.suite import CASE_BY_NAME

compare = importlib.import_module("qnb.compare")  # the module (qnb.compare is the function)


def test_a_race_qnb_check_finds_is_named():
    reason = compare._where_else(last_writer_wins, (3, 1, 1), [np.zeros(1, np.int32)])
    assert reason.startswith("programs race, as qnb.check finds: write-write, programs (0, 0, 0)")
    assert "both store winner[0]" in reason


def test_no_race_is_blamed_where_qnb_check_finds_none():
    # the tiled matmul (f16 in, f32 out): every program stores its own tile
    case = CASE_BY_NAME["tiled_matmul"]
    grid, args = case.make(np.random.default_rng(0), np.float16)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    reason = compare._where_else(case.kernel, grid, args)
    assert reason == (
        "qnb.check finds no race between programs: the arrays differ outside its steps"
    )
    assert "race" not in reason.replace("no race", "")
