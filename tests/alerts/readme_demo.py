"""The README's `groundwatch demo` block against what `groundwatch demo` prints here.

Run as a plain script in a fresh ``groundwatch[demo]`` install (``.ci/run`` does, in its wheels
venv): it runs the demo with that environment's ``groundwatch`` and exits 1, showing the
difference, when the README block is not what it printed (bar the progress lines and the run
time). ``tests/alerts/test_demo.py`` runs the same comparison in the development environment::

    python tests/alerts/readme_demo.py [README.md]
"""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- demo-output: groundwatch demo -->\n```\n"


def readme_sample(readme: Path = README) -> list[str]:
    """The lines of the README's demo block."""
    block = readme.read_text("utf-8").split(MARKER, 1)[1]
    return block.split("\n```", 1)[0].splitlines()


def shown(stdout: str) -> list[str]:
    """What the README shows of a run: every line but the progress bar and the run time."""
    return [x for x in stdout.splitlines() if not x.startswith(("Done in", "["))]


def run_demo(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        command, capture_output=True, text=True, timeout=300, **kwargs
    )


def main(argv: list[str]) -> int:
    readme = Path(argv[0]) if argv else README
    out = run_demo([sys.executable, "-m", "groundwatch", "demo"])
    if out.returncode != 0:
        print(out.stdout + out.stderr, file=sys.stderr)
        return 1
    expected, got = readme_sample(readme), shown(out.stdout)
    if expected != got:
        sys.stderr.writelines(
            line + "\n" for line in difflib.unified_diff(expected, got, "README", "printed")
        )
        return 1
    print(f"the README's demo block is what groundwatch demo prints ({len(got)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
