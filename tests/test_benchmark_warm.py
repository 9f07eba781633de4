"""benchmarks/bench_warm.py runs: cold and warm processes on cpu, and ``--baseline``
measures another checkout's qnb in the same rounds, printed beside this one's."""

from __future__ import annotations

from pathlib import Path

from benchmarks import bench_warm

REPO = Path(__file__).resolve().parents[1]


def test_bench_warm_prints_before_and_after_rows_for_a_baseline(monkeypatch, capsys):
    monkeypatch.setattr(bench_warm, "ROUNDS", 1)
    bench_warm.main(["--baseline", str(REPO), "cpu"])
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[1]: line.split() for line in lines if line.startswith("cpu ")}
    assert set(rows) == {"before", "after"}, lines
    for row in rows.values():  # process and launches, cold/warm/ratio, then 4 phases
        ratios = [float(field.rstrip("x")) for field in row if field.endswith("x")]
        assert len(ratios) == 2 and all(ratio > 0 for ratio in ratios), row
    # each ratio with its range over the rounds, and the baseline's warm process against
    # this one's, round by round
    for row in rows.values():
        spreads = [field for field in row if field.startswith("[") and field.endswith("]")]
        assert len(spreads) == 2, row
    (speedup,) = [line for line in lines if "before / after by round" in line]
    assert [part.split()[0] for part in speedup.split(": ", 1)[1].split(", ")] == [
        "process",
        "launches",
        "first",
        "rest",
    ]
