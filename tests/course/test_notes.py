"""Every ```python block of every lesson's notes.md runs (so the notes cannot rot).

The blocks of one notes.md run in order, in one namespace, from the repository root, exactly
as a student pasting them into one Python session would (`kuiper.tools.course.run_notes`). The
`kuiper ...` lines of the ```bash blocks are checked too: all must parse, and those that need no
file of the student's own run and succeed.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kuiper.tools.cli import build_parser
from kuiper.tools.course import course_dir, lessons, python_blocks, run_notes

ROOT = Path(__file__).resolve().parents[2]

# Lessons whose notes export models with pnnx (seconds each, not milliseconds).
SLOW = {8}


def notes_params():
    for number, folder in lessons().items():
        marks = [pytest.mark.slow] if number in SLOW else []
        yield pytest.param(folder / "notes.md", id=folder.name, marks=marks)


@pytest.mark.parametrize("notes", notes_params())
def test_every_python_block_of_the_notes_runs(notes):
    assert python_blocks(notes), f"{notes} has no ```python block"
    run_notes(notes)


def test_the_readme_has_no_python_block_left_unrun():
    # The syllabus only has shell commands; if a Python block appears there, run it here too.
    readme = course_dir() / "README.md"
    for _, code in python_blocks(readme):
        exec(compile(code, str(readme), "exec"), {"__name__": "__notes__"})  # noqa: S102


def test_python_blocks_are_found_with_their_lines(tmp_path):
    md = tmp_path / "notes.md"
    md.write_text("# t\n```python\nx = 1\n```\ntext\n```bash\nls\n```\n```python\ny = x\n```\n")
    assert python_blocks(md) == [(2, "x = 1"), (9, "y = x")]


def kuiper_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of every `kuiper ...` line in a ```bash block of the course's Markdown."""
    found = []
    for md in sorted(course_dir().glob("*/notes.md")) + [course_dir() / "README.md"]:
        for block in re.findall(r"```bash\n(.*?)```", md.read_text(), re.DOTALL):
            for line in block.splitlines():
                if line.startswith("kuiper "):
                    found.append((f"{md.parent.name}/{md.name}",
                                  shlex.split(line, comments=True)[1:]))
    return found


COMMANDS = kuiper_commands()


def test_every_kuiper_command_in_the_notes_parses():
    assert len(COMMANDS) > 20
    parser = build_parser()
    for where, argv in COMMANDS:
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{where}: `kuiper {' '.join(argv)}` is not a valid command line")


RUNNABLE = sorted({tuple(argv) for _, argv in COMMANDS
                   if argv[:2] not in (["course", "check"],)
                   and all((ROOT / a).exists() for a in argv if a.endswith(".param"))})


@pytest.mark.parametrize("argv", RUNNABLE, ids=[" ".join(a) for a in RUNNABLE])
def test_the_kuiper_commands_of_the_notes_run(argv):
    """Those that need no file of your own (`course check` is tested in test_exercises.py)."""
    proc = subprocess.run([sys.executable, "-m", "kuiper", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
