"""The ``qnb`` command line, run for real in a subprocess (as a user would run it)."""

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.cli_in_turn import run_in_turn


def run_qnb(*args, cache_dir=None, timeout=180, env=None):
    """``python -m qnb ARGS`` with a private cache dir (and ``env`` set); returns the
    CompletedProcess."""
    settings = ("QNB_CACHE", "QNB_ALWAYS_COMPILE", "QNB_CACHE_MAX_BYTES")
    env = {k: v for k, v in os.environ.items() if k not in settings} | (env or {})
    if cache_dir is not None:
        env["QNB_CACHE_DIR"] = str(cache_dir)
    return subprocess.run(
        [sys.executable, "-m", "qnb", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_version_matches_installed_metadata():
    result = run_qnb("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"qnb {metadata.version('qnb')}"


def test_console_script_is_installed():
    script = Path(sys.executable).with_name("qnb")
    if not script.exists():
        script = shutil.which("qnb")
    assert script, "the `qnb` console script is not installed (pip install -e .)"
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("qnb ")


def test_doctor_reports_backends_versions_and_cache(tmp_path):
    cache_dir = tmp_path / "kernel-cache"
    result = run_qnb("doctor", cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for section in ("Backends", "Versions", "Kernel cache"):
        assert section in out
    for backend in ("cpu", "wgpu", "cuda"):
        assert backend in out
    assert "numpy" in out and "python" in out
    assert str(cache_dir) in out
    assert "writable" in out
    assert "Traceback" not in result.stderr


# The other commands run in turn in one process (tests/cli_in_turn.py), each under its own
# settings and cache directory, read at call time, as a launch reads them
# (test_doctor_in_turn_reads_each_setting_afresh holds that). The command itself runs in a
# process of its own in the tests above and in test_a_closed_stdout_ends_quietly.
CACHE_OFF = ("0", "off", "false", "no")
ALWAYS_COMPILE = ("1", "true", "yes", "on")
SETTINGS = ("QNB_CACHE", "QNB_ALWAYS_COMPILE", "QNB_CACHE_MAX_BYTES")


def _a_file(directory: Path) -> Path:
    """``directory``, made a regular file: nothing can be created under it, even by root."""
    directory.write_text("")
    return directory


def _an_entry_unlink_refuses(directory: Path) -> Path:
    directory.mkdir()
    (directory / f"k-{'f' * 64}.json").mkdir()  # unlink fails for a directory, even for root
    return directory


def _a_deeply_nested_entry(directory: Path) -> Path:
    directory.mkdir()
    (directory / f"k-{'a' * 64}.json").write_text("[" * 100_000 + "]" * 100_000)
    return directory


# (name, args, {setting: value}, its cache directory): a fresh path of its own (None, not
# made), what a function makes of that path, or the directory of the run it names (run
# earlier: they share it, in order).
RUNS = [
    *((f"off-{v}", ["doctor"], {"QNB_CACHE": v}, None) for v in CACHE_OFF),
    *((f"off-{v}-json", ["doctor", "--json"], {"QNB_CACHE": v}, None) for v in CACHE_OFF),
    *((f"always-{v}", ["doctor"], {"QNB_ALWAYS_COMPILE": v}, None) for v in ALWAYS_COMPILE),
    ("bad-bound", ["doctor"], {"QNB_CACHE_MAX_BYTES": "abc"}, None),
    ("file", ["doctor"], {}, _a_file),
    ("file-json", ["doctor", "--json"], {}, "file"),
    ("json", ["doctor", "--json"], {}, None),
    ("under-a-file", ["doctor", "--json"], {}, lambda d: _a_file(d) / "cache"),
    ("usage", [], {}, None),
    ("explain-no-name", ["cache", "explain"], {}, None),
    ("unknown-action", ["cache", "frobnicate"], {}, None),
    *((f"action-{a}", ["cache", a], {}, None) for a in ("stats", "list", "clear")),
    ("action-none", ["cache"], {}, None),  # no action: list
    ("clear-then-list", ["cache", "clear"], {}, None),
    ("clear-then-list-2", ["cache", "list"], {}, "clear-then-list"),
    ("unremovable", ["cache", "clear"], {}, _an_entry_unlink_refuses),
    ("nested", ["cache", "list"], {}, _a_deeply_nested_entry),
    ("nested-explain", ["cache", "explain", "k"], {}, "nested"),
]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """{name: (status, stdout, stderr, cache dir)} of each of RUNS, in one process."""
    base = tmp_path_factory.mktemp("in-turn")
    directories, jobs = {}, []
    for name, args, settings, directory in RUNS:
        if isinstance(directory, str):
            directories[name] = directories[directory]
        else:
            directories[name] = (directory or (lambda d: d))(base / name)
        jobs.append([{"QNB_CACHE_DIR": str(directories[name]), **settings}, args])
    results = run_in_turn(jobs, {k: v for k, v in os.environ.items() if k not in SETTINGS})
    return {name: (*result, directories[name]) for (name, *_), result in zip(RUNS, results)}


def test_no_command_prints_usage(ran):
    status, out, _, _ = ran["usage"]
    assert status == 2
    assert "doctor" in out and "cache" in out


def test_doctor_json_has_the_backend_records(ran):
    status, out, err, directory = ran["json"]
    assert status == 0, err
    report = json.loads(out)
    backends = {b["name"]: b for b in report["backends"]}
    assert set(backends) == {"cpu", "wgpu", "cuda", "cuda-host"}, report["backends"]
    assert backends["cpu"]["available"] is True
    for record in backends.values():
        # an unavailable backend always says why
        assert record["available"] or record["reason"]
    # "auto" picks an available backend; a software Vulkan adapter never beats cpu
    assert backends[report["auto"]]["available"]
    if "CPU" in backends["wgpu"]["device"] and not backends["cuda"]["available"]:
        assert report["auto"] == "cpu"
    if backends["wgpu"]["available"]:  # what the device takes: f16, the largest array
        assert "MiB each" in backends["wgpu"]["limits"]
    assert report["versions"]["qnb"] == metadata.version("qnb")
    assert report["cache"]["directory"] == str(directory)
    assert report["cache"]["writable"] is True


def test_doctor_flags_an_unwritable_cache_dir(ran):
    status, out, err, directory = ran["under-a-file"]
    assert status == 0, err
    cache = json.loads(out)["cache"]
    assert cache["directory"] == str(directory) and cache["writable"] is False


def test_cache_explain_needs_a_name(ran):
    status, _, err, _ = ran["explain-no-name"]
    assert status == 2
    assert "NAME" in err


def test_cache_rejects_unknown_action(ran):
    status, _, err, _ = ran["unknown-action"]
    assert status == 2
    assert "invalid choice" in err


@pytest.mark.parametrize("action", ["stats", "list", "clear", "none"])
def test_cache_actions_run(ran, action):
    status, _, err, _ = ran[f"action-{action}"]
    assert status == 0, err
    assert "Traceback" not in err


def test_cache_clear_then_list_in_a_private_dir(ran):
    assert ran["clear-then-list"][0] == 0
    status, out, err, directory = ran["clear-then-list-2"]
    assert status == 0, err
    assert out == f"no entries in {directory}\n"


@pytest.mark.parametrize("value", CACHE_OFF)
def test_doctor_says_the_disk_level_is_off_as_the_library_does(ran, value):
    status, out, _, _ = ran[f"off-{value}"]
    assert status == 0
    assert f"disk level off (QNB_CACHE={value})" in out
    status, out, _, _ = ran[f"off-{value}-json"]
    assert status == 0 and json.loads(out)["cache"]["disk_cache_enabled"] is False


@pytest.mark.parametrize("value", ALWAYS_COMPILE)
def test_doctor_says_every_launch_compiles_as_the_library_does(ran, value):
    assert f"QNB_ALWAYS_COMPILE={value}: every launch compiles" in ran[f"always-{value}"][1]


def test_doctor_flags_a_cache_dir_that_is_a_regular_file(ran):
    out = ran["file"][1]
    assert "NOT usable: it is not a directory" in out
    assert "disk level off (the directory is not usable)" in out
    cache = json.loads(ran["file-json"][1])["cache"]
    assert cache["writable"] is False and cache["disk_cache_enabled"] is False


def test_doctor_flags_an_invalid_size_bound(ran):
    out = ran["bad-bound"][1]
    assert "QNB_CACHE_MAX_BYTES='abc' is not a number of bytes: ignored" in out


def test_doctor_in_turn_reads_each_setting_afresh(ran):
    """The runs share a process: a setting of one run must not reach the next (the
    next run, with another directory and no QNB_CACHE, keeps its disk level on)."""
    status, out, _, directory = ran["always-1"]
    assert status == 0 and "disk level off" not in out and str(directory) in out


def test_cache_clear_reports_what_it_could_not_remove(ran):
    status, out, err, _ = ran["unremovable"]
    assert status == 1
    assert f"could not remove 1 entry: k-{'f' * 64}.json: Is a directory" in err
    assert "Traceback" not in err and out == ""


def test_cache_list_and_explain_skip_a_deeply_nested_entry(ran):
    status, out, err, directory = ran["nested"]
    assert status == 0 and out == f"no entries in {directory}\n", err
    status, explained, more, _ = ran["nested-explain"]
    assert status == 1 and "no entries for kernel 'k'" in explained
    assert "Traceback" not in err + more


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "qnb", "cache", "list"],
        ["-m", "qnb", "cache", "explain", "k"],
        ["-m", "qnb", "doctor"],
        ["-m", "qnb.cache.cli", "list"],
    ],
)
def test_a_closed_stdout_ends_quietly(tmp_path, command):
    """`qnb cache list | head -3`: the reader went away; no BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout fails with EPIPE
    env = dict(os.environ, QNB_CACHE_DIR=str(tmp_path))
    try:
        result = subprocess.run(
            [sys.executable, *command], stdout=write_end, stderr=subprocess.PIPE, text=True,
            env=env, timeout=180,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 141  # as for a process ended by SIGPIPE


def test_cache_list_tells_kernels_of_one_name_apart(tmp_path):
    """Two modules each define a kernel ``k``: the listing names each one's file and line."""
    for name, body in (("first", "out[0] = 1"), ("second", "out[0] = 2")):
        (tmp_path / f"{name}.py").write_text(
            f"import qnb\n\n\n@qnb.kernel\ndef k(out):\n    {body}\n", encoding="utf-8"
        )
    script = (
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import first, second\n"
        "first.k(np.zeros(1, np.int32)); second.k(np.zeros(1, np.int32))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "QNB_CACHE"}
    env["QNB_CACHE_DIR"] = str(tmp_path / "cache")
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=180
    )
    assert ran.returncode == 0, ran.stderr
    result = run_qnb("cache", "list", cache_dir=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split()[-2:] == ["defined", "at"]
    assert sorted(row.split()[-1] for row in rows) == [
        f"{tmp_path / 'first.py'}:5",
        f"{tmp_path / 'second.py'}:5",
    ]
