"""A grade in a notebook: a short report (the verdict, the sentence, the cases) and a
picture of the wrong elements of the output: red where a program stored a wrong value,
orange where no program wrote, every one ringed at any size."""

from __future__ import annotations

import html

import numpy as np

WRONG, UNWRITTEN = 2, 1  # the codes of the picture's map
LEGEND = ((2, "a wrong value stored"), (1, "no program wrote it"), (0, "right"))


def picture(grade) -> bytes | None:
    """The PNG of the wrong elements of the failing output (None where there is none to
    draw: a grade that passed or a launch that raised, or without matplotlib)."""
    from qnb.viz import static_render
    from qnb.viz.compare_view import coded_map, decode_pooled

    if grade.got_array is None:
        return None
    got, want = grade.got_array, grade.expected_array
    codes = np.where(grade.unwritten, UNWRITTEN, np.where(grade.wrong_mask, WRONG, 0))
    codes = codes.astype(np.int32)
    state = coded_map(codes, [want, got])
    count = int(np.count_nonzero(codes))
    state["title"] = (
        f"{grade.array} ({static_render.shape_text(got.shape)}) for {grade.case.label}: "
        f"{count:,} wrong of {got.size:,}"
    )
    fig = static_render.new_figure(6.0, 3.2 if got.ndim == 1 or got.shape[0] <= 4 else 4.4)
    if fig is None:
        return None
    static_render.draw_mismatch_map(fig.add_subplot(), state, decode_pooled(state), LEGEND)
    return static_render.figure_png(fig)


def grade_html(grade) -> str:
    """The grade as HTML: the verdict, the sentence, the cases tried, the picture."""
    from qnb.viz.static_render import png_data_uri

    colour = "#2a7a2a" if grade.passed else "#b02020"
    verdict = "passed" if grade.passed else "not yet"
    rows = "".join(
        f"<tr><td>{'&#x2713;' if r.passed else '&#x2717;' if r.tried else '&#xb7;'}</td>"
        f"<td>{html.escape(r.case.label)}</td><td>{html.escape(r.case.why)}</td>"
        f"<td>{html.escape('' if r.passed else r.message)}</td></tr>"
        for r in grade.cases
    )
    png = None if grade.passed else picture(grade)
    image = f'<div><img src="{png_data_uri(png)}"/></div>' if png else ""
    where = ""
    if not grade.passed and grade.index is not None:
        where = (
            f"<div>first wrong element: {html.escape(grade.array)}{list(grade.index)}, "
            f"expected {html.escape(repr(grade.expected))}, got {html.escape(repr(grade.got))}"
            f"; stored by program {html.escape(str(grade.program))} at line {grade.line}</div>"
        )
    return (
        '<div class="qnb-static qnb-grade" style="font:12px monospace">'
        f'<div><b style="color:{colour}">{html.escape(grade.puzzle)}: {verdict}</b> '
        f"(on {html.escape(grade.backend)})</div>"
        f"<div>{html.escape(grade.message)}</div>{where}"
        '<table style="border-collapse:collapse;font:11px monospace">'
        f"{rows}</table>{image}</div>"
    )


__all__ = ["grade_html", "picture"]
