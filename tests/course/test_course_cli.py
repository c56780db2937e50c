"""`kuiper course list/check` as a student uses them, on a copy of a lesson, and check_array."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kuiper.course.lessons import check_array, lessons

ROOT = Path(__file__).resolve().parents[2]


def kuiper_cli(*args, course_dir=None):
    env = dict(os.environ)
    env.pop("KUIPER_COURSE_IMPL", None)
    if course_dir is not None:
        env["KUIPER_COURSE_DIR"] = str(course_dir)
    return subprocess.run([sys.executable, "-m", "kuiper", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_course_list_names_every_lesson():
    proc = kuiper_cli("course", "list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(lessons()) >= 11  # the first edition had 11; more came since
    assert lines[0].split()[0] == "1" and "tour" in lines[0].lower()
    assert "OpenCL" in proc.stdout


def test_an_unknown_lesson_is_a_clear_error():
    proc = kuiper_cli("course", "check", "99")
    assert proc.returncode == 1
    assert "no lesson 99" in proc.stderr and "04_graph" in proc.stderr


@pytest.fixture
def lesson4(tmp_path, pristine_course):
    """A copy of lesson 4 as shipped, where a student can edit exercises.py."""
    course = tmp_path / "course_notes"
    shutil.copytree(pristine_course / "04_graph", course / "04_graph",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return course


def test_check_goes_from_failing_to_passing(lesson4):
    before = kuiper_cli("course", "check", "4", course_dir=lesson4)
    assert before.returncode == 1
    assert "NotImplementedError: lesson 4: write dfs_iterative" in before.stdout
    assert "lesson 4: not yet" in before.stdout

    exercises = lesson4 / "04_graph" / "exercises.py"
    text = exercises.read_text()
    # The student's solution: here, pasted from kuiper/graph/topo.py (renamed helpers included).
    import inspect

    from kuiper.graph import topo

    solved = text
    for name in ("dfs_iterative", "level_schedule"):
        stub_start = solved.index(f"def {name}(")
        stub_end = solved.find("\n\n\ndef ", stub_start)
        stub_end = len(solved) if stub_end < 0 else stub_end
        solved = solved[:stub_start] + inspect.getsource(getattr(topo, name)).rstrip() + \
            solved[stub_end:]
    solved += ("\n\nfrom kuiper.graph.topo import WHITE, GRAY, BLACK, _roots, _cycle_error  "
               "# noqa: E402\n")
    exercises.write_text(solved)
    after = kuiper_cli("course", "check", "4", course_dir=lesson4)
    assert after.returncode == 0, after.stdout[-3000:]
    assert "lesson 4: all exercises pass" in after.stdout


def test_a_wrong_answer_is_reported_and_a_changed_signature_warned(lesson4):
    exercises = lesson4 / "04_graph" / "exercises.py"
    exercises.write_text(
        "from kuiper.graph.topo import dfs_iterative  # noqa: F401\n\n\n"
        "def level_schedule(ops, strict=True):\n    return [list(ops)]\n")
    proc = kuiper_cli("course", "check", "4", course_dir=lesson4)
    assert proc.returncode == 1
    assert "warning: level_schedule(ops, strict=True) should be level_schedule(ops:" \
        in proc.stdout
    assert "test_level_schedule" in proc.stdout and "AssertionError" in proc.stdout
    # Wrong answers only, no stub left: the footer must not blame an untouched stub.
    assert "NotImplementedError" not in proc.stdout
    assert proc.stdout.strip().endswith("lesson 4: not yet (read the first failure above)")


def solve_lesson4(course):
    """A student's solved lesson 4: the functions of kuiper/graph/topo.py."""
    (course / "04_graph" / "exercises.py").write_text(
        "from kuiper.graph.topo import dfs_iterative, level_schedule  # noqa: F401\n")


def test_a_selection_that_matches_nothing_fails_and_says_so(lesson4):
    solve_lesson4(lesson4)
    proc = kuiper_cli("course", "check", "4", "--", "-k", "no_such_test", course_dir=lesson4)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "lesson 4: no test selected" in proc.stdout and "nothing was checked" in proc.stdout
    assert "pass" not in proc.stdout.splitlines()[-1]


def test_a_slow_check_says_how_long_it_takes_before_it_starts():
    """Lesson 15's check runs PP-OCRv5 for minutes: it says so first (its CHECK_TIME)."""
    slow = kuiper_cli("course", "check", "15", "--", "-k", "no_such_test")
    first = slow.stdout.splitlines()[:3]
    assert any(line.startswith("this check takes about 3 minutes") for line in first), first
    quick = kuiper_cli("course", "check", "4", "--", "-k", "no_such_test")
    assert "this check takes" not in quick.stdout, "lesson 4 takes seconds: nothing to say"


def test_a_partial_selection_is_not_called_all_exercises(lesson4):
    solve_lesson4(lesson4)
    proc = kuiper_cli("course", "check", "4", "--", "-k", "level", course_dir=lesson4)
    assert proc.returncode == 0, proc.stdout[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert "all exercises pass" not in proc.stdout
    assert last.startswith("lesson 4: the ") and "selected tests pass" in last, last
    assert "not selected: run without -k for the whole lesson" in last


def test_the_usage_line_shows_pytest_args_as_optional_after_a_double_dash():
    proc = kuiper_cli("course", "check", "-h")
    assert proc.returncode == 0
    usage = proc.stdout.splitlines()[0]
    assert usage == "usage: kuiper course check [-h] LESSON [-- PYTEST_ARG ...]", usage


def test_pytest_missing_where_the_lesson_runs_says_to_install_the_extra_once(lesson4, tmp_path):
    """pytest importable by `kuiper` but not by the lesson's run (simulated by a
    sitecustomize that hides it in student mode): one hint, and no talk of stubs."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import os, sys\n"
        "class _NoPytest:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pytest', '_pytest'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "if os.environ.get('KUIPER_COURSE_IMPL') == 'student':\n"
        "    sys.meta_path.insert(0, _NoPytest())\n")
    env = dict(os.environ, KUIPER_COURSE_DIR=str(lesson4))
    env.pop("KUIPER_COURSE_IMPL", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hide), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "kuiper", "course", "check", "4"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "No module named" in out  # pytest's own failure, shown as it is
    assert out.count('pip install -e ".[course]"') == 1, out
    assert "stub" not in out, out


def test_check_array_says_what_differs():
    check_array(np.array([1.0, np.nan], np.float32), np.array([1.0, np.nan], np.float32))
    with pytest.raises(AssertionError, match=r"x: shape \(3,\), expected \(2, 2\)"):
        check_array(np.zeros(3), np.zeros((2, 2)), "x")
    with pytest.raises(AssertionError, match="dtype int64, expected float32"):
        check_array(np.zeros(3, np.int64), np.zeros(3, np.float32))
    with pytest.raises(AssertionError) as info:
        check_array(np.array([[1, 2], [3, 4]], np.float32),
                    np.array([[1, 2], [3, 4.5]], np.float32), "y")
    message = str(info.value)
    assert "y: 1 of 4 elements differ, max difference 0.5" in message
    assert "at (1, 1): got 4, expected 4.5" in message
    with pytest.raises(AssertionError, match="NaN against a number"):
        check_array(np.array([np.nan], np.float32), np.array([1.0], np.float32))
    with pytest.raises(AssertionError, match="at \\(0,\\): got 2, expected 3"):
        check_array(np.array([2]), np.array([3]))
