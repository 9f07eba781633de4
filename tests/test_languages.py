"""The one table of target languages (qnb/languages.py) is what every user of it reads."""

import pytest

import qnb
from qnb.backends import registry
from qnb.languages import LANGUAGES


@qnb.kernel
def _double(x: qnb.Array[qnb.f32, 1]):
    x[0] = x[0] * 2.0


def test_each_language_is_spelled_by_the_backend_the_table_names():
    assert list(LANGUAGES) == ["ir", "cuda", "wgsl"]
    for name, language in LANGUAGES.items():
        if language.backend is not None:
            assert registry.get(language.backend).language == name


@pytest.mark.parametrize("name", list(LANGUAGES))
def test_source_writes_every_language_in_the_table(name):
    text = _double.source(name)
    assert "x" in text and text.strip()


def test_source_refuses_a_language_outside_the_table_naming_the_table():
    with pytest.raises(qnb.QnbTypeError, match="renders 'ir', 'cuda' or 'wgsl', not 'ptx'"):
        _double.source("ptx")


def test_the_magics_and_the_display_read_the_table():
    pytest.importorskip("IPython")
    from qnb.magics.display import GeneratedSource
    from qnb.magics.magics import QnbMagics

    show = next(
        action for action in QnbMagics.qkernel.parser._actions if "--show" in action.option_strings
    )
    assert list(show.choices) == list(LANGUAGES)
    for name, language in LANGUAGES.items():
        assert GeneratedSource("k", name, "").title == f"k: {language.title}"
