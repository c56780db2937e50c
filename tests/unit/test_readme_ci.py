"""README.md's set-up commands, .ci/run and pyproject.toml stay consistent.

.ci/run reads the test command from between README's `<!-- test-command -->` markers, so they
cannot drift; these tests check the extraction itself, and that pytest's "no tests collected"
(exit status 5) fails CI instead of passing it silently.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def block(marker: str) -> list[str]:
    match = re.search(rf"<!-- {marker} -->\n```bash\n(.*?)```\n<!-- /{marker} -->", README,
                      re.DOTALL)
    assert match, f"README.md has no ```bash block between <!-- {marker} --> markers"
    return match.group(1).strip().splitlines()


def test_readme_has_exactly_two_setup_commands():
    assert block("main-command") == ["pip install -e . && kuiper demo"]
    (test_command,) = block("test-command")
    assert test_command.startswith("pip install torch==2.13.0 && ")
    # two pytest-xdist workers, each test file in one of them (module-level exports stay shared)
    assert test_command.endswith("python -m pytest -q -n 2 --dist loadfile")


def test_ci_runs_the_readme_test_command():
    result = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--print-command"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == block("test-command")


@pytest.mark.parametrize("status, expected", [(0, 0), (1, 1), (5, 1)])
def test_ci_exit_status(tmp_path, status, expected):
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "README.md").write_text(
        f"<!-- test-command -->\n```bash\necho running && exit {status}\n```\n"
        "<!-- /test-command -->\n")
    result = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == expected, result.stdout + result.stderr
    assert "running" in result.stdout
    if status == 5:
        assert "no tests" in result.stderr


def test_torch_is_pinned_wherever_it_appears():
    pyproject = (ROOT / "pyproject.toml").read_text()
    mentions = re.findall(r'"torch[^"]*"', pyproject)
    assert mentions and all(m == '"torch==2.13.0"' for m in mentions), mentions
    for command in block("test-command"):
        for spec in re.findall(r"\btorch\S*", command):
            assert spec == "torch==2.13.0", command


def test_the_readme_says_how_long_the_test_command_takes():
    """A new user runs the test command and waits: the paragraph right after it says for how
    long on the smallest machine it is run on, and how to run less."""
    after = README.split("<!-- /test-command -->", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"about \d+-\d+ minutes on a quiet 2-core machine", after), after
    assert "python -m pytest -q tests/" in after  # how to run one part's tests


def test_the_readme_names_every_kernel_cache_folder(monkeypatch):
    """Where compiled kernels are kept: each folder `kuiper devices` lists is in the README,
    at its default place."""
    from kuiper.opencl.device.binary_cache import cache_folders

    for variable in ("KUIPER_CACHE_DIR", "XDG_CACHE_HOME", "POCL_CACHE_DIR", "CUDA_CACHE_PATH"):
        monkeypatch.delenv(variable, raising=False)
    for _what, path in cache_folders():
        shown = "~/" + str(path.relative_to(Path.home()))  # ~/.cache/kuiper/kernels ...
        assert shown in README, f"README.md does not name the kernel cache folder {shown}"
