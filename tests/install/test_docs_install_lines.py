"""Every install line a person can copy from the docs, the README, an example or an error
message installs from
a clone of the repository (``pip install -e ".[serve]"``): groundwatch is not on a package
registry, so ``pip install "groundwatch[serve]"`` would fail, or install whatever a stranger
published under the unclaimed name."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES += sorted((ROOT / "examples").glob("*.py"))
# The hints the code prints when an extra is missing, too.
SOURCES += sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "integrations").rglob("*.py"))
SOURCES += sorted((ROOT / "models").rglob("*.md"))
COMMAND = re.compile(r"pip install ([^`\n]*)")


def registry_installs(text: str) -> list[str]:
    """The ``pip install`` commands in ``text`` that name a groundwatch package by name."""
    found = []
    for match in COMMAND.finditer(text):
        # The command only: up to a comment or the next command of the line.
        args = re.split(r"\s#|&&|;|\|", match.group(1))[0]
        for token in args.split():
            name = token.strip("\"'()`,;")
            if name.startswith("groundwatch"):  # groundwatch, groundwatch[x], groundwatch-langchain
                found.append(match.group(0).strip())
                break
    return found


def test_the_checker_finds_a_registry_install() -> None:
    assert registry_installs('run `pip install "groundwatch[serve]"` first') == [
        'pip install "groundwatch[serve]"'
    ]
    assert registry_installs("pip install groundwatch-langchain") != []
    assert registry_installs('pip install -e ".[serve]" -e integrations/langchain') == []
    assert registry_installs("pip install -e . && groundwatch demo  # (groundwatch-x)") == []


def test_every_install_line_installs_from_a_clone() -> None:
    bad = {
        str(path.relative_to(ROOT)): found
        for path in SOURCES
        if (found := registry_installs(path.read_text(encoding="utf-8")))
    }
    assert bad == {}


PUBLISH = re.compile(r"(?:^|\s)(?:-p|--publish)[ =](\S+)")


def test_every_docker_port_a_reader_can_copy_is_published_on_loopback_only() -> None:
    # A Collector's OTLP and Prometheus ports have no authentication: `-p 9464:9464` would
    # open them on every interface of the host.
    sources = [*SOURCES, *sorted((ROOT / "examples").rglob("*.y*ml"))]
    published = []
    for path in sources:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "docker run" in line or line.lstrip("# ").startswith("-p "):
                published += [(path.name, p) for p in PUBLISH.findall(line)]
    assert published, "the Collector's docker line is no longer found"
    open_ = [(name, p) for name, p in published if not p.startswith("127.0.0.1:")]
    assert not open_, open_
