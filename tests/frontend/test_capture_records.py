"""``capture.classify`` answers with a typed record (issue 14: records, not tagged tuples)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import qnb
from qnb.errors import QnbCaptureError
from qnb.frontend.capture import UNDEFINED, CaptureKind, Classified, classify
from qnb.frontend.parse import parse_function


def _owner(x):
    x[0] = 1.0


OWNER = parse_function(_owner)


@qnb.func
def _helper(x):
    return x


@pytest.mark.parametrize(
    ("value", "kind", "form"),
    [
        (2.5, CaptureKind.CONST, ["float", (2.5).hex()]),
        ((1, True), CaptureKind.CONST, ["tuple", [["int", 1], ["bool", True]]]),
        (math, CaptureKind.NAMESPACE, None),
        (qnb.exp, CaptureKind.INTRINSIC, None),
        (np.exp, CaptureKind.INTRINSIC, None),
        (_helper, CaptureKind.CALLABLE, None),
        (UNDEFINED, CaptureKind.UNDEFINED, None),
    ],
)
def test_classify_gives_a_record_with_a_kind_and_a_form(value, kind, form):
    found = classify(OWNER, ("name",), value)
    assert isinstance(found, Classified)
    assert found.kind is kind
    assert found.form == form


def test_a_record_is_not_a_tuple_and_cannot_be_changed():
    found = classify(OWNER, ("name",), 3)
    assert not isinstance(found, tuple)  # no `kind, *rest = ...` unpacking by position
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.kind = CaptureKind.NAMESPACE


def test_a_value_that_is_no_constant_still_raises():
    with pytest.raises(QnbCaptureError, match="pass it as a parameter"):
        classify(OWNER, ("name",), np.zeros(3))
