"""The languages ``kernel.source(lang)`` writes a kernel in: one table, read by the kernel,
the magics' ``--show`` and the code display.

Each names the backend whose renderer spells it (``None`` for the IR, which is the
kernel itself) and how a notebook shows it (a title and a Pygments lexer).
"""

from __future__ import annotations

from typing import NamedTuple


class Language(NamedTuple):
    name: str  # what ``kernel.source`` and ``%%qkernel --show`` take
    title: str  # how a notebook names it
    lexer: str  # the Pygments lexer that highlights it
    backend: str | None  # the backend whose ``render`` writes it; None: the IR


LANGUAGES: dict[str, Language] = {
    language.name: language
    for language in (
        Language("ir", "qnb IR", "text", None),
        Language("cuda", "CUDA C++", "cuda", "cuda"),
        Language("wgsl", "WGSL", "wgsl", "wgpu"),
    )
}


def spoken(quote: bool = True) -> str:
    """The language names as a sentence lists them: "'ir', 'cuda' or 'wgsl'"."""
    names = [repr(name) if quote else name for name in LANGUAGES]
    return f"{', '.join(names[:-1])} or {names[-1]}"
