"""Write JupyterLab settings overrides into a venv: no news/update toast, and widget state
saved with the notebook (so saved demos show their widgets without a kernel).

Usage: python scripts/configure_lab.py VENV_DIR
Merges into an existing overrides.json instead of replacing it.
"""

import json
import sys
from pathlib import Path

OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": True},
}


def main(venv: str) -> int:
    path = Path(venv) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        settings = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        settings = {}
    for plugin, values in OVERRIDES.items():
        settings.setdefault(plugin, {}).update(values)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".venv"))
