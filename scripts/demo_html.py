"""Execute the notebooks headless and write HTML pages that work offline.

Widget state is not stored in the pages: each widget then shows its static view (PNG and
HTML from ``_repr_mimebundle_``) instead of a script that loads a widget manager from a CDN.

    python scripts/demo_html.py OUTPUT_DIR NOTEBOOK...
"""

import pathlib
import sys

import nbformat
from nbconvert import HTMLExporter
from nbconvert.preprocessors import ExecutePreprocessor


def render(notebook_path: pathlib.Path, output_dir: pathlib.Path) -> pathlib.Path:
    notebook = nbformat.read(notebook_path, as_version=4)
    notebook.metadata.pop("widgets", None)  # saved state would pull the CDN manager in
    executor = ExecutePreprocessor(timeout=300, store_widget_state=False)
    executor.preprocess(notebook, {"metadata": {"path": str(notebook_path.parent)}})
    html, _ = HTMLExporter().from_notebook_node(notebook)
    target = output_dir / (notebook_path.stem + ".html")
    target.write_text(html, encoding="utf-8")
    return target


def main(argv: list[str]) -> int:
    output_dir = pathlib.Path(argv[0])
    output_dir.mkdir(parents=True, exist_ok=True)
    for name in argv[1:]:
        print(f"wrote {render(pathlib.Path(name), output_dir)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
