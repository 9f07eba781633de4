"""The ``qnb`` command line, run for real in a subprocess (as a user would run it)."""

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest


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


def test_no_command_prints_usage():
    result = run_qnb()
    assert result.returncode == 2
    assert "doctor" in result.stdout and "cache" in result.stdout


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


def test_doctor_json_has_the_backend_records(tmp_path):
    result = run_qnb("doctor", "--json", cache_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    backends = {b["name"]: b for b in report["backends"]}
    assert set(backends) == {"cpu", "wgpu", "cuda"}, report["backends"]
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
    assert report["cache"]["directory"] == str(tmp_path)
    assert report["cache"]["writable"] is True


def test_doctor_flags_an_unwritable_cache_dir(tmp_path):
    # Under a regular file nothing can be created, not even by root.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    result = run_qnb("doctor", "--json", cache_dir=blocker / "cache")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cache"]["writable"] is False


def test_cache_explain_needs_a_name():
    result = run_qnb("cache", "explain")
    assert result.returncode == 2
    assert "NAME" in result.stderr


def test_cache_rejects_unknown_action():
    result = run_qnb("cache", "frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


@pytest.mark.parametrize("action", [["stats"], ["list"], ["clear"], []])
def test_cache_actions_run(tmp_path, action):
    result = run_qnb("cache", *action, cache_dir=tmp_path)  # no action: list
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


def test_cache_clear_then_list_in_a_private_dir(tmp_path):
    assert run_qnb("cache", "clear", cache_dir=tmp_path).returncode == 0
    result = run_qnb("cache", "list", cache_dir=tmp_path)
    assert result.returncode == 0, result.stderr


# `qnb doctor`'s cache lines under each setting below, text and --json: one process runs
# the command (qnb.cli.main, as `python -m qnb` does) under each environment in turn, where
# a process each spent ~6 s on the same imports and backend probes; the settings are read
# at call time, as a launch reads them. The command itself runs in a process of its own in
# the tests above.
CACHE_OFF = ("0", "off", "false", "no")
ALWAYS_COMPILE = ("1", "true", "yes", "on")

_DOCTOR_IN_TURN = """
import contextlib, io, json, os, sys
from qnb.cli import main
results = []
for env, args in json.loads(sys.argv[1]):
    saved = dict(os.environ)
    os.environ.update(env)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(args)
    os.environ.clear()
    os.environ.update(saved)
    results.append([status, printed.getvalue()])
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def doctor(tmp_path_factory):
    """{(variable, value, format): (status, stdout)} of `qnb doctor` under each setting;
    ``QNB_CACHE_DIR`` is a fresh directory, or a regular file for ("file", "", format)."""
    base = tmp_path_factory.mktemp("doctor")
    blocker = base / "a-file"
    blocker.write_text("")
    runs = [(("QNB_CACHE", value), ["doctor"]) for value in CACHE_OFF]
    runs += [(("QNB_CACHE", value), ["doctor", "--json"]) for value in CACHE_OFF]
    runs += [(("QNB_ALWAYS_COMPILE", value), ["doctor"]) for value in ALWAYS_COMPILE]
    runs += [(("QNB_CACHE_MAX_BYTES", "abc"), ["doctor"])]
    runs += [(("file", ""), ["doctor"]), (("file", ""), ["doctor", "--json"])]
    jobs = []
    for number, ((variable, value), args) in enumerate(runs):
        env = {"QNB_CACHE_DIR": str(blocker if variable == "file" else base / f"cache-{number}")}
        if variable != "file":
            env[variable] = value
        jobs.append([env, args])
    settings = ("QNB_CACHE", "QNB_ALWAYS_COMPILE", "QNB_CACHE_MAX_BYTES")
    env = {k: v for k, v in os.environ.items() if k not in settings}
    ran = subprocess.run(
        [sys.executable, "-c", _DOCTOR_IN_TURN, json.dumps(jobs)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    results = json.loads(ran.stdout)
    return {
        (variable, value, "json" if "--json" in args else "text"): tuple(result)
        for ((variable, value), args), result in zip(runs, results)
    }


@pytest.mark.parametrize("value", CACHE_OFF)
def test_doctor_says_the_disk_level_is_off_as_the_library_does(doctor, value):
    status, out = doctor["QNB_CACHE", value, "text"]
    assert status == 0
    assert f"disk level off (QNB_CACHE={value})" in out
    status, out = doctor["QNB_CACHE", value, "json"]
    assert status == 0 and json.loads(out)["cache"]["disk_cache_enabled"] is False


@pytest.mark.parametrize("value", ALWAYS_COMPILE)
def test_doctor_says_every_launch_compiles_as_the_library_does(doctor, value):
    assert (
        f"QNB_ALWAYS_COMPILE={value}: every launch compiles"
        in doctor["QNB_ALWAYS_COMPILE", value, "text"][1]
    )


def test_doctor_flags_a_cache_dir_that_is_a_regular_file(doctor):
    out = doctor["file", "", "text"][1]
    assert "NOT usable: it is not a directory" in out
    assert "disk level off (the directory is not usable)" in out
    cache = json.loads(doctor["file", "", "json"][1])["cache"]
    assert cache["writable"] is False and cache["disk_cache_enabled"] is False


def test_doctor_flags_an_invalid_size_bound(doctor):
    out = doctor["QNB_CACHE_MAX_BYTES", "abc", "text"][1]
    assert "QNB_CACHE_MAX_BYTES='abc' is not a number of bytes: ignored" in out


def test_doctor_in_turn_reads_each_setting_afresh(doctor):
    """The runs share a process: a setting of one run must not reach the next (the
    next run, with another directory and no QNB_CACHE, keeps its disk level on)."""
    out = doctor["QNB_ALWAYS_COMPILE", "1", "text"][1]
    assert "disk level off" not in out and "cache-8" in out


def test_cache_clear_reports_what_it_could_not_remove(tmp_path):
    blocked = tmp_path / f"k-{'f' * 64}.json"
    blocked.mkdir()  # unlink fails for a directory, even for root
    result = run_qnb("cache", "clear", cache_dir=tmp_path)
    assert result.returncode == 1
    assert f"could not remove 1 entry: {blocked.name}: Is a directory" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_cache_list_and_explain_skip_a_deeply_nested_entry(tmp_path):
    (tmp_path / f"k-{'a' * 64}.json").write_text("[" * 100_000 + "]" * 100_000)
    listed = run_qnb("cache", "list", cache_dir=tmp_path)
    assert listed.returncode == 0 and "no entries" in listed.stdout, listed.stderr
    explained = run_qnb("cache", "explain", "k", cache_dir=tmp_path)
    assert explained.returncode == 1 and "no entries for kernel 'k'" in explained.stdout
    assert "Traceback" not in listed.stderr + explained.stderr


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
