"""gpu_check.sh's line of half-precision results: of the cuda tests in a junit xml whose
id names bf16 or f16, how many passed, failed and were skipped (the bit-exact checks
against the cpu backend are among them: ``test_bf16.py``, the every-op dtype cases).

    python scripts/gpu_check_halves.py pytest.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter


def outcomes(path: str) -> dict[str, Counter]:
    """``{"bf16": Counter(passed=…, failed=…, skipped=…), "f16": …}`` for the cuda tests."""
    counts = {"bf16": Counter(), "f16": Counter()}
    for case in ElementTree.parse(path).iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if "cuda" not in name or "cuda-host" in name or "cuda_host" in name:
            continue
        kind = "bf16" if "bf16" in name else "f16" if "f16" in name else None
        if kind is None:
            continue
        tags = {child.tag for child in case}
        outcome = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        counts[kind][outcome] += 1
    return counts


def main(path: str) -> None:
    for kind, count in outcomes(path).items():
        print(
            f"  {kind + ' cuda':10s}{count['passed']} passed, {count['failed']} failed, "
            f"{count['skipped']} skipped"
        )


if __name__ == "__main__":
    main(sys.argv[1])
