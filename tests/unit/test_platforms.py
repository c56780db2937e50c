"""`pip install kuiper-engine` resolves on macOS arm64, Windows and Linux aarch64, from here.

pip can resolve for another machine (`--platform TAG --python-version 3.11 --only-binary=:all:`
with `--dry-run`), but it evaluates environment markers such as `sys_platform == 'linux'`
against the machine it RUNS on, not the one named by --platform. So a dependency whose only
wheel is for Linux x86-64 (pocl-binary-distribution) would be pulled into every platform's
resolution on this machine, and fail there, even with a marker. That is why PoCL is the
`pocl` extra and not a dependency; these tests make sure it stays so.

The resolution tests ask the package index and are marked `network`: they are skipped, with the
reason, when the index cannot be reached. By hand, from the checkout (one platform tag each):

    python -m pip install --dry-run --ignore-installed --only-binary=:all: \
        --python-version 3.11 --platform macosx_14_0_arm64 --target /tmp/t .
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLATFORMS = ["macosx_14_0_arm64", "win_amd64", "manylinux2014_aarch64"]
POCL = "pocl-binary-distribution"
# what .gitignore keeps out of the repository: build outputs must not end up in the wheel
NOT_SOURCE = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                    ".pytest_cache", ".ruff_cache", ".benchmarks", ".device",
                                    ".whl")


def pip(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def index_url() -> str:
    """The index pip is configured to use (pip.conf or PIP_INDEX_URL), else PyPI's."""
    listing = pip("config", "list", timeout=60).stdout
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".index-url") and not key.endswith("extra-index-url"):
            return value.strip().strip("'\"").split()[0]
    return "https://pypi.org/simple"


def why_index_unreachable() -> str | None:
    """None when the index answers for pyopencl within seconds, else the reason.

    pyopencl, because the machine may also have local indexes (extra-index-url, find-links)
    holding numpy or threadpoolctl: those would answer even with the network down.
    """
    url = index_url().rstrip("/") + "/pyopencl/"
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT"))
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            response.read(1)
    except (OSError, ValueError) as e:  # URLError, timeouts and refused connections are OSError
        return f"{url}: {e}"
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """kuiper-engine's wheel, built once from a copy of this checkout.

    The copy keeps setuptools' build/ folder (and any stale file in it) out of the working tree.
    """
    why = why_index_unreachable()
    if why:
        pytest.skip(f"the package index cannot be reached ({why})")
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    built = pip("wheel", "--no-deps", "-w", str(tmp / "dist"), str(source))
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = (tmp / "dist").glob("kuiper_engine-*.whl")
    return found


def would_install(pip_output: str) -> set[str]:
    """Normalised project names of pip's "Would install name-1.0 other-2.0" line."""
    line = next((s for s in pip_output.splitlines() if s.startswith("Would install ")), "")
    names = (item.rsplit("-", 1)[0] for item in line.split()[2:])
    return {re.sub(r"[-_.]+", "-", name).lower() for name in names}


@pytest.mark.network
@pytest.mark.parametrize("tag", PLATFORMS)
def test_resolves_without_pocl(tag, wheel, tmp_path):
    result = pip("install", "--dry-run", "--ignore-installed", "--only-binary=:all:",
                 "--python-version", "3.11", "--platform", tag, "--target",
                 str(tmp_path / "t"), str(wheel))
    assert result.returncode == 0, result.stdout + result.stderr
    names = would_install(result.stdout)
    assert {"kuiper-engine", "numpy", "pyopencl", "threadpoolctl"} <= names, result.stdout
    # this wheel's version, not another one pip may have backtracked to on the index
    version = wheel.name.split("-")[1]
    assert f"kuiper-engine-{version} " in result.stdout, result.stdout
    assert POCL not in names, result.stdout


# --- without the network: the declaration itself ----------------------------------------------
def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is new in Python 3.11")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0].lower()


def test_pocl_is_never_a_dependency_and_always_marked():
    project = pyproject()["project"]
    assert POCL not in {requirement_name(r) for r in project["dependencies"]}
    mentions = [(extra, r) for extra, reqs in project.get("optional-dependencies", {}).items()
                for r in reqs if requirement_name(r) == POCL]
    assert mentions, f"no extra installs {POCL}: the `pocl` extra is gone"
    marker = "sys_platform == 'linux' and platform_machine == 'x86_64'"
    for extra, requirement in mentions:
        _, _, its_marker = requirement.partition(";")
        assert marker in its_marker.replace('"', "'"), (extra, requirement)
