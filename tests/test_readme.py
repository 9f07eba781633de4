"""The README's kernel example runs as written (on the cpu backend) and prints what it says."""

import contextlib
import io
import pathlib
import re

import qnb

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_example_runs(tmp_path):
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README.md has no python example"
    path = tmp_path / "readme_example.py"  # a real file: kernels read their source
    path.write_text(blocks[0])
    printed = io.StringIO()
    with qnb.backend("cpu"), contextlib.redirect_stdout(printed):
        exec(compile(blocks[0], str(path), "exec"), {"__name__": "readme_example"})  # noqa: S102
    lines = printed.getvalue().splitlines()
    assert lines[0] == "True"
    assert "generated WGSL" in lines[1]
