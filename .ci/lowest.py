"""Print a pip constraints file that pins every declared dependency at its lowest allowed version.

    python .ci/lowest.py [--free NAME ...] > lowest.txt
    pip install -c lowest.txt -e ".[testing,...]" -e integrations/langchain ...

It reads the core's dependencies and extras and the integrations' dependencies, and pins each
package at the highest of the lower bounds declared for it (``>=``, ``==``, ``~=``), so the tests
that run on these pins prove that every declared minimum is true. pip has no "lowest direct
versions" resolution of its own; this keeps CI on plain pip and its cache. ``--free NAME`` leaves
a package to the resolver, for a floor that another pin already raises (the SDK pins the API to
its own version), which the core-only step proves on its own instead (``--core``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# Every integration is a package under integrations/, found here as it is added; the
# distributions this repository builds itself (the core, integrations/*, models/*) are never
# pinned.
INTEGRATIONS = sorted(path.parent for path in (ROOT / "integrations").glob("*/pyproject.toml"))
OWN = {
    canonicalize_name(tomllib.loads(path.read_text())["project"]["name"])
    for path in (ROOT / "pyproject.toml", *ROOT.glob("*/*/pyproject.toml"))
}


def _requirements(core_only: bool) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = list(project["dependencies"])
    if core_only:
        return found
    for extra in project.get("optional-dependencies", {}).values():
        found += extra
    for path in INTEGRATIONS:
        found += tomllib.loads((path / "pyproject.toml").read_text())["project"]["dependencies"]
    return found


def lowest_pins(core_only: bool = False, free: frozenset[str] = frozenset()) -> dict[str, str]:
    """Package name -> its lowest allowed version, over every requirement that names it."""
    floors: dict[str, Version] = {}
    for line in _requirements(core_only):
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name in OWN or name in free:
            continue
        lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
        if not lows:
            raise SystemExit(f"{line!r} has no lower bound: declare the minimum it needs")
        floors[name] = max([*lows, floors.get(name, lows[0])])
    return {name: str(version) for name, version in sorted(floors.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", action="store_true", help="only the core's own dependencies")
    parser.add_argument("--free", action="append", default=[], help="leave NAME unpinned")
    args = parser.parse_args(argv)
    free = frozenset(canonicalize_name(n) for n in args.free)
    for name, version in lowest_pins(args.core, free).items():
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
