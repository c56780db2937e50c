"""Write tests/fuzz/corpus/: the minimal case of every class of failure found by fuzzing.

    python tests/fuzz/make_corpus.py

Each case is a folder with model.pnnx.param (and model.pnnx.bin when it needs weights) and a
BACKEND file naming the backends it is replayed on. The suite replays all of them in the
sandbox (test_fuzz.py): each must load and run, or be refused with a KuiperError. A failure
found by a campaign (`kuiper fuzz --save DIR`) is added by copying its folder
here, under a name that says what it is.
"""

from __future__ import annotations

import io
import struct
import warnings
import zipfile
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parent / "corpus"
HEAD = "7767517\n"
BOTH = "cpu opencl"


def model(lines: list[str], n_operands: int | None = None) -> str:
    n = n_operands if n_operands is not None else len(lines) + 1
    return HEAD + f"{len(lines)} {n}\n" + "\n".join(lines) + "\n"


def relu_on(dtype: str) -> str:
    return model([f"pnnx.Input in0 0 1 0 #0=(1,3,8,8){dtype}", "nn.ReLU relu 1 1 0 1",
                  "pnnx.Output out 1 0 1"])


def expression(expr: str, n_in: int = 1, shape: str = "(2,3)f32", then: str | None = None
               ) -> str:
    lines = [f"pnnx.Input in{i} 0 1 {i} #{i}={shape}" for i in range(n_in)]
    ins = " ".join(str(i) for i in range(n_in))
    lines.append(f"pnnx.Expression ex {n_in} 1 {ins} e expr={expr}")
    if then:
        lines.append(then)
        lines.append("pnnx.Output out 1 0 y")
    else:
        lines.append("pnnx.Output out 1 0 e")
    return model(lines)


def zipped(entries: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a duplicate name is one of the cases
        for name, data in entries:
            z.writestr(name, data)
    return out.getvalue()


LINEAR = model(["pnnx.Input in0 0 1 0 #0=(1,4)f32",
                "nn.Linear fc 1 1 0 1 bias=True in_features=4 out_features=2 "
                "@weight=(2,4)f32 @bias=(2)f32",
                "pnnx.Output out 1 0 1"])
W = np.arange(8, dtype=np.float32).tobytes()
B = np.ones(2, np.float32).tobytes()
GOOD_BIN = zipped([("fc.weight", W), ("fc.bias", B)])


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    return data[:offset] + struct.pack(fmt, value) + data[offset + struct.calcsize(fmt):]


def local_header(data: bytes, k: int) -> int:
    start = -1
    for _ in range(k + 1):
        start = data.index(b"PK\x03\x04", start + 1)
    return start


def central_entry(data: bytes, k: int) -> int:
    start = -1
    for _ in range(k + 1):
        start = data.index(b"PK\x01\x02", start + 1)
    return start


def zip64_end(data: bytes) -> bytes:
    end = data.rfind(b"PK\x05\x06")
    record = b"PK\x06\x06" + struct.pack("<QHHIIQQQQ", 44, 45, 45, 0, 0, 1, 1, 2**63 - 1,
                                          2**63 - 1)
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, end, 1)
    return data[:end] + record + locator + data[end:]


CASES: dict[str, tuple[str, bytes | None, str]] = {
    # 1. input dtypes the float kernels must not read past (OpenCL memory corruption)
    **{f"input-{dt}-relu": (relu_on(dt), None, BOTH)
       for dt in ("u8", "i8", "i16", "f16", "bool", "f64", "i64", "i32", "c64")},
    # 3. load-time blow-ups from tiny files
    "expr-pow-10-100000000": (expression("pow(10,100000000)"), None, BOTH),
    "expr-lshift-1-1e11": (expression("lshift(1,100000000000)"), None, BOTH),
    "upsample-scale-1e8": (model(["pnnx.Input in0 0 1 0 #0=(1,1,4,4)f32",
                                  "nn.Upsample up 1 1 0 1 mode=nearest scale_factor=(1.0,1e8)",
                                  "pnnx.Output out 1 0 1"]), None, BOTH),
    "upsample-scale-1e999": (model(["pnnx.Input in0 0 1 0 #0=(1,1,4,4)f32",
                                    "nn.Upsample up 1 1 0 1 mode=nearest "
                                    "scale_factor=(1e999,2.0)",
                                    "pnnx.Output out 1 0 1"]), None, BOTH),
    "input-100000-cubed": (relu_on("f32").replace("(1,3,8,8)", "(100000,100000,100000)"), None,
                           BOTH),
    "pad-2-to-the-32": (model(["pnnx.Input in0 0 1 0 #0=(1,4,6,6)f32",
                               "F.pad p 1 1 0 1 mode=constant pad=(4294967296,1,0,0) value=None",
                               "pnnx.Output out 1 0 1"]), None, BOTH),
    "arange-10-to-the-12": (model(["pnnx.Input in0 0 1 x #x=(1)f32",
                                   "torch.arange a 0 1 0 start=0 end=1000000000000 step=1",
                                   "pnnx.Output out 2 0 0 x"]), None, BOTH),
    # 4. bare exceptions
    "expr-nested-500": (expression("neg(" * 500 + "@0" + ")" * 500), None, BOTH),
    "tuple-chain-3000": (model(["pnnx.Input in0 0 1 t0 #t0=(2)f32"]
                               + [f"prim::TupleConstruct tc{k} 1 1 t{k} t{k + 1}"
                                  for k in range(3000)]
                               + ["pnnx.Output out 1 0 t3000"]), None, BOTH),
    "attribute-negative-dims": (model(["pnnx.Attribute a 0 1 0 @data=(-2,-2)f32",
                                       "pnnx.Output out 1 0 0"]), zipped([("a.data", b"")]),
                                BOTH),
    "input-20-digit-dim": (relu_on("f32").replace("(1,3,8,8)", "(99999999999999999999)"), None,
                           BOTH),
    "operand-count-5000-digits": (relu_on("f32").replace("nn.ReLU relu 1 1",
                                                         "nn.ReLU relu " + "9" * 5000 + " 1"),
                                  None, BOTH),
    "conv-stride-2-63": (model(["pnnx.Input in0 0 1 0 #0=(1,1,4,4)f32",
                                "nn.Conv2d c 1 1 0 1 bias=False dilation=(1,1) groups=1 "
                                "in_channels=1 kernel_size=(1,1) out_channels=1 padding=(0,0) "
                                "padding_mode=zeros stride=(9223372036854775808,1) "
                                "@weight=(1,1,1,1)f32",
                                "pnnx.Output out 1 0 1"]),
                         zipped([("c.weight", np.ones(1, np.float32).tobytes())]), BOTH),
    "consumed-never-produced": (model(["pnnx.Input in0 0 1 0 #0=(2,3)f32",
                                       "Tensor.t t 0 1 a", "torch.t t2 1 1 b c",
                                       "pnnx.Output out 1 0 c"]), None, BOTH),
    "input-without-output": (model(["pnnx.Input in0 0 1 0 #0=(2,3)f32", "pnnx.Input in2 0 0",
                                    "pnnx.Output out 1 0 0"]), None, BOTH),
    "output-consumed": (model(["pnnx.Input in0 0 1 0 #0=(2,3)f32",
                               "pnnx.Output out 1 1 0 1", "nn.ReLU r 1 1 1 2",
                               "pnnx.Output out2 1 0 2"]), None, BOTH),
    "constant-expr-feeds-softmax": (expression("1e-5", then="F.softmax sm 1 1 e y dim=0"),
                                    None, BOTH),
    "constant-erf-feeds-relu": (expression("erf(0)", then="nn.ReLU r 1 1 e y"), None, BOTH),
    "expr-list-of-size-and-tensor": (expression("[size(@0),@0]"), None, BOTH),
    "expr-abc-feeds-softmax": (expression("abc", then="F.softmax sm 1 1 e y dim=0"), None,
                               BOTH),
    "expr-list-of-tensor": (expression("[@0]"), None, BOTH),
    # 5. silently wrong weights
    "bin-zip64-end-record": (LINEAR, zip64_end(GOOD_BIN), BOTH),
    "bin-name-len-flipped": (LINEAR, patched(GOOD_BIN, local_header(GOOD_BIN, 1) + 26, "<H",
                                             len("fc.bias") + 1), BOTH),
    "bin-extra-len-flipped": (LINEAR, patched(GOOD_BIN, local_header(GOOD_BIN, 0) + 28, "<H",
                                              4), BOTH),
    "bin-duplicate-entry": (LINEAR, zipped([("fc.weight", W), ("fc.bias", B),
                                            ("fc.bias", np.zeros(2, np.float32).tobytes())]),
                            BOTH),
    "bin-offset-to-other-entry": (
        model(["pnnx.Input in0 0 1 0 #0=(1,2)f32",
               "nn.Linear fc 1 1 0 1 bias=True in_features=2 out_features=2 "
               "@weight=(2,2)f32 @bias=(2)f32", "pnnx.Output out 1 0 1"]),
        (lambda d: patched(d, central_entry(d, 1) + 42, "<I", local_header(d, 0)))(
            zipped([("fc.weight", np.ones(4, np.float32).tobytes()),
                    ("fc.bias", np.ones(2, np.float32).tobytes() * 2)])), BOTH),
    "bin-crc-mismatch": (LINEAR, GOOD_BIN.replace(W, W[:-1] + b"\x7f"), BOTH),
    # 6. a float literal beyond float32 in generated OpenCL code
    "expr-mul-1e39": (expression("mul(@0,1e39)"), None, BOTH),
}


def main() -> None:
    CORPUS.mkdir(exist_ok=True)
    for name, (param, weights, backends) in CASES.items():
        folder = CORPUS / name
        folder.mkdir(exist_ok=True)
        (folder / "model.pnnx.param").write_text(param)
        if weights is not None:
            (folder / "model.pnnx.bin").write_bytes(weights)
        (folder / "BACKEND").write_text(backends + "\n")
    print(f"wrote {len(CASES)} cases under {CORPUS}")


if __name__ == "__main__":
    main()
