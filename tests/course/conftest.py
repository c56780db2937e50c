"""Fixtures of the course's own tests."""

from __future__ import annotations

import pytest

from kuiper.course.pristine import pristine_copy


@pytest.fixture(scope="session")
def pristine_course(tmp_path_factory):
    """A copy of course_notes/ with every exercises.py as shipped (read from git where the
    student has solved it): the stub checks read this, never the student's own files."""
    return pristine_copy(tmp_path_factory.mktemp("pristine") / "course_notes")
