"""`kuiper run` for real use: batches of images, resize modes, normalisation, tasks, detection.

Most cases run `main()` in this process on the digits model that ships with Kuiper (1-channel
8x8 input, 10 classes); the ImageNet default needs a 3-channel classifier (test_cli.py's tiny
one) and the detection path a small YOLO-shaped model, both exported with pnnx once. Expected
tensors are computed here from the pixel values, never read back from Kuiper's own run.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.graph.runtime_graph import Port
from kuiper.testing import assert_close
from tests.unit.test_cli import assert_user_error, run_main, tiny, torch_forward

DIGITS = "kuiper/demo/digits.pnnx.param"
GREY_PORT = Port("in", (1, 1, 8, 8), np.dtype(np.float32))
RGB_PORT = Port("in", (1, 3, 8, 8), np.dtype(np.float32))
__all__ = ["tiny"]  # the fixture, imported so pytest finds it here


def save(path, mode, size, colour, **kwargs):
    from PIL import Image

    Image.new(mode, size, colour).save(path, **kwargs)
    return path


# --- preprocessing, unit by unit ------------------------------------------------------------
def test_letterbox_keeps_the_aspect_ratio_and_pads_with_grey(tmp_path):
    from kuiper.io.preprocess import LETTERBOX_GREY, Preprocessing, load_images

    # 16 wide, 8 high into 8x8: scale 0.5 -> 8x4 in the middle rows 2..5, grey above and below
    path = save(tmp_path / "wide.png", "L", (16, 8), 200)
    x, (placement,) = load_images([path], GREY_PORT, Preprocessing("letterbox"))
    expected = np.full((8, 8), LETTERBOX_GREY / 255, np.float32)
    expected[2:6] = 200 / 255
    np.testing.assert_allclose(x[0, 0], expected, rtol=1e-6)
    assert placement.scale == (0.5, 0.5) and placement.offset == (0.0, 2.0)
    # a box on the picture's content maps back to the original's corners
    back = placement.to_original(np.array([[0, 2, 8, 6]], np.float32))
    np.testing.assert_allclose(back, [[0, 0, 16, 8]])


def test_center_crop_cuts_the_middle_and_squash_stretches(tmp_path):
    from PIL import Image

    from kuiper.io.preprocess import Preprocessing, load_images

    # left half black, right half white, 32 wide, 8 high: a center crop to 8x8 sees only the
    # middle 8 columns (4 black, 4 white); squash sees the whole width (same split, 4 + 4)
    image = Image.new("L", (32, 8), 0)
    image.paste(255, (16, 0, 32, 8))
    image.save(tmp_path / "halves.png")
    crop, (where,) = load_images([tmp_path / "halves.png"], GREY_PORT,
                                 Preprocessing("center-crop"))
    assert where.offset == (-12.0, 0.0) and where.scale == (1.0, 1.0)
    np.testing.assert_allclose(crop[0, 0, :, :4], 0.0, atol=1e-6)
    np.testing.assert_allclose(crop[0, 0, :, 4:], 1.0, atol=1e-6)
    # a narrow strip: the crop keeps the middle, so it is uniform; squash keeps the edges
    strip = Image.new("L", (64, 8), 255)
    strip.paste(0, (0, 0, 8, 8))
    strip.save(tmp_path / "strip.png")
    crop, _ = load_images([tmp_path / "strip.png"], GREY_PORT, Preprocessing("center-crop"))
    squash, _ = load_images([tmp_path / "strip.png"], GREY_PORT, Preprocessing("squash"))
    np.testing.assert_allclose(crop, 1.0, atol=1e-6)
    assert squash[0, 0, :, 0].max() < 0.5


def test_task_defaults_and_overrides():
    from kuiper.io.preprocess import IMAGENET_MEAN, Preprocessing

    classify = Preprocessing.for_task("classify", channels=3)
    assert (classify.resize, classify.mean) == ("center-crop", IMAGENET_MEAN)
    assert "ImageNet" in classify.describe(3) and "classify default" in classify.describe(3)
    detect = Preprocessing.for_task("detect", channels=3)
    assert (detect.resize, detect.mean) == ("letterbox", None)
    assert "no normalisation" in detect.describe(3)
    assert Preprocessing.for_task("classify", channels=1).mean is None  # grey: not ImageNet's
    assert Preprocessing.for_task("classify", 3, normalize=False).mean is None
    mine = Preprocessing.for_task("detect", 3, "squash", mean=(0.5,), std=(0.25,))
    assert (mine.resize, mine.mean, mine.std) == ("squash", (0.5,), (0.25,))
    np.testing.assert_allclose(mine.channel_values(3)[0], [0.5] * 3)


def test_alpha_and_uint8_warnings(tmp_path, caplog):
    from kuiper.io.inputs import load_input

    save(tmp_path / "a.png", "RGBA", (8, 8), (10, 20, 30, 0))
    with caplog.at_level("WARNING", logger="kuiper"):
        x = load_input(tmp_path / "a.png", RGB_PORT)
    assert "alpha channel" in caplog.text and "a.png" in caplog.text
    np.testing.assert_allclose(x[0, :, 0, 0], np.array([10, 20, 30]) / 255, rtol=1e-6)
    caplog.clear()
    np.save(tmp_path / "u8.npy", np.full((1, 1, 8, 8), 255, np.uint8))
    with caplog.at_level("WARNING", logger="kuiper"):
        load_input(tmp_path / "u8.npy", GREY_PORT)
    assert "uint8" in caplog.text and "unscaled" in caplog.text


# --- the command ----------------------------------------------------------------------------
def test_folder_of_images_is_one_batch(tmp_path, capsys):
    folder = tmp_path / "pics"
    folder.mkdir()
    for k, level in enumerate((0, 128, 255)):
        save(folder / f"{k}.png", "L", (8 + 4 * k, 8), level)
    (folder / "notes.txt").write_text("not an image: skipped")
    result = run_main(capsys, "run", DIGITS, "--input", str(folder), "--output",
                      str(tmp_path / "y.npy"))
    assert result.returncode == 0, result.stderr
    assert "preprocessing: 3 image(s) -> 3x1x8x8" in result.stdout
    assert "task: classify" in result.stdout  # guessed from the 1x10 output, and said
    assert "no normalisation" in result.stdout  # grey digits: [0, 1], not ImageNet
    assert "top-5 [0.png]" in result.stdout and "top-5 [2.png]" in result.stdout
    # the same batch through the Python API, built from the known pixel values
    import kuiper

    x = np.stack([np.full((1, 8, 8), level / 255, np.float32) for level in (0, 128, 255)])
    assert_close(np.load(tmp_path / "y.npy"), kuiper.load(DIGITS).forward(x)[0])
    # several image files work the same way as a folder
    files = [str(folder / f"{k}.png") for k in range(3)]
    again = run_main(capsys, "run", DIGITS, "--input", files[0], "--input", files[1],
                     "--input", files[2])
    assert again.returncode == 0 and "3 image(s) -> 3x1x8x8" in again.stdout


def test_batch_from_input_shape_must_match_the_data(tmp_path, capsys):
    save(tmp_path / "one.png", "L", (8, 8), 9)
    assert_user_error(run_main(capsys, "run", DIGITS, "--input-shape", "3x1x8x8", "--input",
                               str(tmp_path / "one.png")), "batch of 3", "1 image(s)")
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 8, 8), np.float32))
    assert_user_error(run_main(capsys, "run", DIGITS, "--input-shape", "3x1x8x8", "--input",
                               str(tmp_path / "x.npy")), "3x1x8x8", "1x1x8x8")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_user_error(run_main(capsys, "run", DIGITS, "--input", str(empty)), "no image")


def test_imagenet_is_the_classify_default_for_three_channels(tiny, tmp_path, capsys):
    path, module = tiny
    rgb = (255, 0, 128)
    save(tmp_path / "pic.png", "RGB", (30, 20), rgb)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    pixels = np.array(rgb)[None, :, None, None] / 255
    cases = {(): (pixels - mean[None, :, None, None]) / std[None, :, None, None],
             ("--no-normalize",): pixels,
             ("--mean", "0.5", "--std", "0.5,0.25,1"):
                 (pixels - 0.5) / np.array([0.5, 0.25, 1])[None, :, None, None]}
    for flags, expected in cases.items():
        result = run_main(capsys, "run", str(path), "--input", str(tmp_path / "pic.png"),
                          "--output", str(tmp_path / "y.npy"), *flags)
        assert result.returncode == 0, result.stderr
        x = np.broadcast_to(expected, (1, 3, 8, 8)).astype(np.float32)
        assert_close(np.load(tmp_path / "y.npy"), torch_forward(module, x))
    assert "mean 0.5,0.5,0.5 std 0.5,0.25,1 (--mean/--std)" in result.stdout
    # detect on a classifier: refused with what was expected, not a NumPy error
    assert_user_error(run_main(capsys, "run", str(path), "--input", str(tmp_path / "pic.png"),
                               "--task", "detect"), "YOLO-style rows", "1x5")


def test_bad_mean_and_output_options(tmp_path, capsys):
    save(tmp_path / "g.png", "L", (8, 8), 3)
    assert run_main(capsys, "run", DIGITS, "--mean", "a,b").returncode == 2
    assert_user_error(run_main(capsys, "run", DIGITS, "--input", str(tmp_path / "g.png"),
                               "--mean", "0.1,0.2"), "--mean", "1-channel")
    assert_user_error(run_main(capsys, "run", DIGITS, "--input", str(tmp_path / "g.png"),
                               "--std", "0"), "--std")
    assert_user_error(run_main(capsys, "run", DIGITS, "--output", str(tmp_path / "y.png")),
                      "only for --task detect")


@pytest.mark.parametrize("option, suffix", [("--output", ".npy"), ("--trace", ".json")])
def test_a_file_name_too_long_is_a_clear_error(tmp_path, capsys, option, suffix):
    # a 300-character name: ENAMETOOLONG from the first stat, a traceback before issue 31
    name = str(tmp_path / ("y" * 300 + suffix))
    assert_user_error(run_main(capsys, "run", DIGITS, option, name), option,
                      f"a file name of {300 + len(suffix)} bytes", "at most 255",
                      "give a shorter name")


def test_quiet_hides_warnings_and_verbose_is_accepted(tmp_path, capsys):
    np.save(tmp_path / "u8.npy", np.zeros((1, 1, 8, 8), np.uint8))
    loud = run_main(capsys, "run", DIGITS, "--input", str(tmp_path / "u8.npy"))
    assert loud.returncode == 0 and "kuiper: warning:" in loud.stderr and "uint8" in loud.stderr
    for flags in (("-q", "run"), ("run", "-q")):
        quiet = run_main(capsys, *flags, DIGITS, "--input", str(tmp_path / "u8.npy"))
        assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert run_main(capsys, "-vv", "run", DIGITS).returncode == 0


# --- detection --------------------------------------------------------------------------------
def tiny_detector():
    """A YOLO-shaped head: a 16x16 image -> 16 rows of (cx, cy, w, h, objectness, 2 classes)
    with boxes in input pixels, as YOLOv5's Detect layer emits them."""
    import torch
    from torch import nn

    class TinyDetector(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 7, kernel_size=4, stride=4)
            self.register_buffer("scale", torch.tensor([16.0, 16, 8, 8, 1, 1, 1]))

        def forward(self, x):
            rows = self.conv(x).flatten(2).permute(0, 2, 1)  # 1 x 16 x 7
            return torch.sigmoid(rows) * self.scale

    torch.manual_seed(3)
    return TinyDetector().eval()


@pytest.mark.slow
def test_detect_decodes_and_draws_boxes_on_the_original(export_model, tmp_path, capsys):
    import torch
    from PIL import Image

    from kuiper.io.postprocess import detect

    module = tiny_detector()
    path = export_model("cli_tiny_detector", module, torch.zeros(1, 3, 16, 16))
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (8, 32, 3), dtype=np.uint8)  # 32 wide, 8 high
    Image.fromarray(pixels).save(tmp_path / "street.png")
    result = run_main(capsys, "run", str(path), "--input", str(tmp_path / "street.png"),
                      "--output", str(tmp_path / "boxes.png"), "--conf", "0.3")
    assert result.returncode == 0, result.stderr
    assert "task: detect" in result.stdout and "resize letterbox" in result.stdout
    # expected: letterbox 32x8 -> 16x4 in rows 6..9 of a grey 16x16, [0, 1], no mean/std
    from kuiper.io.preprocess import LETTERBOX_GREY

    x = np.full((16, 16, 3), LETTERBOX_GREY / 255, np.float32)
    small = Image.fromarray(pixels).resize((16, 4), Image.Resampling.BILINEAR)
    x[6:10] = np.asarray(small, np.float32) / 255
    boxes = detect(torch_forward(module, x.transpose(2, 0, 1)[None].copy()), 0.3)[0]
    assert f"street.png: {len(boxes)} box(es)" in result.stdout
    drawn = Image.open(tmp_path / "boxes.png")
    assert drawn.size == (32, 8)  # drawn on the original picture, not the 16x16 input
    assert len(boxes) >= 1  # seed 3 and this picture give a box to check
    x1, y1, x2, y2 = boxes[0, :4]  # mapped back: x / 0.5, (y - 6) / 0.5, clipped
    back = [max(0, x1 * 2), max(0, (y1 - 6) * 2), min(32, x2 * 2), min(8, (y2 - 6) * 2)]
    assert ",".join(f"{v:.0f}" for v in back) in result.stdout


def test_verbosity_flags_set_the_kuiper_logger(capsys):
    import logging

    from kuiper.cli.logs import configure

    child = logging.getLogger("kuiper.engine_part")  # what the engine's modules log through
    for (verbose, quiet), shown in {(0, False): ["info", "warning"],
                                    (1, False): ["debug", "info", "warning"],
                                    (2, False): ["debug", "info", "warning"],
                                    (0, True): []}.items():
        undo = configure(verbose, quiet)
        try:
            child.debug("d")
            child.info("i")
            child.warning("w")
            child.error("e")
        finally:
            undo()
        lines = capsys.readouterr().err.splitlines()
        assert lines == [f"kuiper: {level}: {level[0]}" for level in shown + ["error"]]
    assert not [h for h in logging.getLogger("kuiper").handlers
                if type(h).__name__ == "StderrHandler"]  # undo() removed it


@pytest.mark.opencl
def test_fallback_warning_reads_as_a_kuiper_warning_line(tmp_path, capsys):
    from tests.conftest import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL device: fallbacks to the host exist on the OpenCL backend only")
    # a float64 input: the ReLU kernel reads float32, so the operator runs on the host
    model = tmp_path / "model.pnnx.param"
    model.write_text("7767517\n3 2\npnnx.Input in0 0 1 0 #0=(1,3,4,4)f64\n"
                     "nn.ReLU relu 1 1 0 1\npnnx.Output out 1 0 1\n")
    loud = run_main(capsys, "run", str(model), "--backend", "opencl")
    assert loud.returncode == 0
    assert "kuiper: warning: 1 operator(s)" in loud.stderr and "relu (nn.ReLU)" in loud.stderr
    assert "KuiperWarning" not in loud.stderr  # not Python's "file:line: Category" form
    quiet = run_main(capsys, "-q", "run", str(model), "--backend", "opencl")
    assert quiet.returncode == 0 and "warning" not in quiet.stderr


# --- what the output is: asked for, not guessed wrong --------------------------------------------
def relu_model(folder, shape):
    """A one-ReLU model: its output has `shape` and any value the input gives it."""
    from kuiper.testing import write_operator_model

    return write_operator_model(folder, "nn.ReLU", [np.zeros(shape, np.float32)])


def test_a_transformer_output_is_not_decoded_as_detections(tmp_path, capsys):
    """A transformer block's 1x8x32 has the shape of YOLO rows; its values are not (scores
    above 1). Before, `kuiper run` printed "detections" with scores above 1 and negative boxes;
    now it prints the output as it is and asks for --task, and `--task detect` is refused."""
    model = relu_model(tmp_path, (1, 8, 32))
    x = np.random.default_rng(0).uniform(-4, 4, (1, 8, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = run_main(capsys, "run", model, "--input", str(tmp_path / "x.npy"))
    assert result.returncode == 0, result.stderr
    assert "not decoded as detections" in result.stdout and "pass --task" in result.stdout
    assert "detections (" not in result.stdout and "box(es)" not in result.stdout
    assert f"max {x.max():.4g}" in result.stdout  # the raw statistics are still printed
    assert_user_error(run_main(capsys, "run", model, "--input", str(tmp_path / "x.npy"),
                               "--task", "detect"),
                      "--task detect expects YOLO-style rows", "range from 0 to")


def test_detection_scores_never_exceed_one(tmp_path, capsys):
    """Rows whose columns 4 on are probabilities are decoded; every printed score is <= 1."""
    model = relu_model(tmp_path, (1, 6, 7))
    rows = np.random.default_rng(1).uniform(0, 1, (1, 6, 7)).astype(np.float32)
    rows[..., :4] = [[8, 8, 4, 4]]  # cx, cy, w, h in pixels
    np.save(tmp_path / "rows.npy", rows)
    result = run_main(capsys, "run", model, "--input", str(tmp_path / "rows.npy"),
                      "--conf", "0.01")
    assert result.returncode == 0, result.stderr
    assert "task: detect" in result.stdout and "box(es)" in result.stdout
    scores = [float(line.split()[-2]) for line in result.stdout.splitlines()
              if line.startswith("    class ")]
    assert scores and max(scores) <= 1.0


def test_an_output_of_no_known_task_asks_for_task(tmp_path, capsys):
    model = relu_model(tmp_path, (1, 3, 8, 8))
    save(tmp_path / "pic.png", "RGB", (8, 8), (10, 20, 30))
    # images are preprocessed for the task: without one, the run stops and asks
    assert_user_error(run_main(capsys, "run", model, "--input", str(tmp_path / "pic.png")),
                      "cannot tell what this model does", "pass --task classify")
    result = run_main(capsys, "run", model, "--input", str(tmp_path / "pic.png"),
                      "--task", "raw")
    assert result.returncode == 0 and "resize squash" in result.stdout
    # arrays need no preprocessing: printed as they are, and --task asked for
    result = run_main(capsys, "run", model)
    assert result.returncode == 0 and "task: unknown" in result.stdout
    assert "pass --task" in result.stdout
