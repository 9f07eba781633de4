"""Execute the notebooks headless and write HTML pages that work offline.

nbconvert's "lab" template puts require.js, MathJax and mermaid in every page's head,
loaded from a CDN. The pages here use a template that extends it with those three blocks
left empty (the notebooks have no LaTeX or mermaid diagrams, and nothing uses require.js),
so a page loads no script from anywhere.

Widget state is not stored in the pages either: each widget then shows its static view
(PNG and HTML from ``_repr_mimebundle_``) instead of a script that loads a widget manager
from a CDN.

    python scripts/demo_html.py OUTPUT_DIR NOTEBOOK...
"""

import pathlib
import sys

import jinja2
import nbformat
from nbconvert import HTMLExporter
from nbconvert.preprocessors import ExecutePreprocessor

OFFLINE_TEMPLATE = "qnb_offline.html.j2"
_TEMPLATES = {
    OFFLINE_TEMPLATE: """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""
}


def offline_exporter() -> HTMLExporter:
    """nbconvert's lab HTML exporter, without the scripts it would fetch from CDNs."""
    return HTMLExporter(
        template_name="lab",
        template_file=OFFLINE_TEMPLATE,
        extra_loaders=[jinja2.DictLoader(_TEMPLATES)],
    )


def to_html(notebook) -> str:
    """The page for an (executed) notebook node."""
    notebook.metadata.pop("widgets", None)  # saved state would pull the CDN manager in
    html, _ = offline_exporter().from_notebook_node(notebook)
    return html


def render(notebook_path: pathlib.Path, output_dir: pathlib.Path) -> pathlib.Path:
    notebook = nbformat.read(notebook_path, as_version=4)
    notebook.metadata.pop("widgets", None)
    executor = ExecutePreprocessor(timeout=300, store_widget_state=False)
    executor.preprocess(notebook, {"metadata": {"path": str(notebook_path.parent)}})
    target = output_dir / (notebook_path.stem + ".html")
    target.write_text(to_html(notebook), encoding="utf-8")
    return target


def main(argv: list[str]) -> int:
    output_dir = pathlib.Path(argv[0])
    output_dir.mkdir(parents=True, exist_ok=True)
    for name in argv[1:]:
        print(f"wrote {render(pathlib.Path(name), output_dir)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
