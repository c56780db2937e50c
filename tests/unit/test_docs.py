"""The documentation points only at things the repository has.

README.md, kuiper/DESIGN.md, parser/PNNX_FORMAT.md and kuiper/PLUGINS.md name files and
folders in `code spans` and link to each other; a file that moves must not leave them pointing
at nothing. And no Markdown or Python file may point outside the repository (a clone has
nothing beside it), or name one of the two design documents without its folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "kuiper/DESIGN.md", "parser/PNNX_FORMAT.md", "kuiper/PLUGINS.md"]
FILE_ENDINGS = (".py", ".cl", ".md", ".toml")
# Folders that are not part of the repository's own text (build outputs, caches, VCS).
SKIP = {".git", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache", ".benchmarks",
        ".device", ".whl", ".venv", "venv", ".tox", "node_modules"}

FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```", re.M | re.S)  # indented ones too (in lists)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Spelled in pieces so that this file does not match its own patterns.
OUTSIDE = "/".join(("..", "shared"))
BARE_DOC = re.compile(r"(?<![\w./-])(" + "|".join(("DESIGN", "PNNX_FORMAT")) + r")\.md\b")


def prose(doc: str) -> str:
    """The document without its fenced code blocks (diagrams and commands, not references)."""
    return FENCE.sub("", (ROOT / doc).read_text())


def path_like(word: str) -> bool:
    """A repository path: has a `/`, names a source file or a folder, and is no pattern."""
    word = word.strip("\"'.,;:()")
    if "/" not in word or any(c in word for c in "<>*{}[]$~") or "://" in word:
        return False
    if word.startswith(("/", "-")):
        return False  # absolute paths (/tmp/...) and options are not repository paths
    return word.endswith(FILE_ENDINGS) or word.endswith("/")


def repo_text_files() -> list[Path]:
    files = []
    for pattern in ("*.md", "*.py"):
        for path in ROOT.rglob(pattern):
            parts = path.relative_to(ROOT).parts
            if any(p in SKIP or p.endswith(".egg-info") for p in parts[:-1]):
                continue
            files.append(path)
    return sorted(files)


def test_the_path_test_finds_what_it_should():
    assert path_like("layers/cpu/relu.py") and path_like("kuiper/demo/")
    assert path_like("tests/unit/test_docs.py),")  # punctuation around a path is dropped
    assert not path_like("layers/cpu/<stem>.py")  # a placeholder, not a file
    assert not path_like("/tmp/resolve") and not path_like("dist/kuiper_engine-*.whl")
    assert not path_like("model_pnnx.py") and not path_like("https://example.org/a.md")
    assert BARE_DOC.search("see " + "DESIGN" + ".md") and not BARE_DOC.search("kuiper/DESIGN.md")


@pytest.mark.parametrize("doc", DOCS)
def test_paths_in_code_spans_exist(doc):
    missing = []
    for span in CODE_SPAN.findall(prose(doc)):
        for word in span.split():
            if path_like(word):
                path = word.strip("\"'.,;:()")
                if not (ROOT / path).exists():
                    missing.append(path)
    assert not missing, f"{doc} names paths the repository does not have: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    here = (ROOT / doc).parent
    missing = []
    for target in LINK.findall(prose(doc)):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = target.split("#", 1)[0]
        if path and not (here / path).exists():
            missing.append(target)
    assert not missing, f"{doc} links to files that do not exist: {missing}"


def test_nothing_points_outside_the_repository_or_at_a_bare_design_document():
    bad = []
    for path in repo_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE in line or BARE_DOC.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bad, ("point inside the repository, and name the design documents with their "
                     "folder (kuiper/DESIGN.md, parser/PNNX_FORMAT.md):\n" + "\n".join(bad))
