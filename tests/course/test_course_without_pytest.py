"""`kuiper course check` on a machine where pytest is missing: one error that says what to install.

pytest comes with the `course` extra, not with Kuiper itself. Its absence is simulated in a
fresh interpreter: a folder first on PYTHONPATH holds a `pytest` package whose import fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_check_without_pytest_says_to_install_the_course_extra(tmp_path):
    (tmp_path / "pytest").mkdir()
    (tmp_path / "pytest" / "__init__.py").write_text(
        'raise ImportError("simulated: no pytest on this machine")\n')
    env = dict(os.environ)
    env.pop("KUIPER_COURSE_IMPL", None)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(tmp_path), str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run([sys.executable, "-m", "kuiper", "course", "check", "4"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("kuiper: error: "), result.stderr
    assert 'pip install -e ".[course]"' in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "stub" not in result.stdout + result.stderr and result.stdout == "", result.stdout
