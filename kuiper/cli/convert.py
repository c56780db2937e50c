"""`kuiper convert MODEL`: an ONNX or TorchScript file to a PNNX model, through pnnx.

Every command that takes a MODEL converts such a file by itself (`convert_model_argument`,
called by the CLI before the command runs), into the cache of kuiper/graph/convert.py. This command
shows the step: it converts (or finds the cached result), prints where the PNNX files are,
and with `-o DIR` copies them there, to keep, edit or share:

    kuiper convert model.onnx -o converted/          # converted/model.pnnx.param + .pnnx.bin
    kuiper convert model.pt --input-shape 1x3x224x224 --show-log
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from kuiper.cli.options import shape_list
from kuiper.core.errors import KuiperError
from kuiper.graph import convert


def add_parser(sub) -> None:
    p = sub.add_parser("convert", help="convert an ONNX or TorchScript model to PNNX with "
                       "pnnx (other commands do it by themselves)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the .onnx, or the TorchScript .pt (torch.jit.trace(...).save)")
    p.add_argument("--input-shape", type=shape_list, metavar="SHAPE",
                   help="input size to convert at, e.g. 1x3x224x224 (several inputs: "
                   "comma-separated); an ONNX file with static sizes needs none")
    p.add_argument("-o", "--output-dir", metavar="DIR", help="copy the .pnnx.param, .pnnx.bin "
                   "and pnnx's PyTorch rebuild (<stem>_pnnx.py) into DIR (created if missing)")
    p.add_argument("--show-log", action="store_true", help="print pnnx's own log (kept in "
                   "pnnx.log in the cache entry otherwise)")
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    if not convert.is_convertible(args.model):
        raise KuiperError(f"{args.model}: kuiper convert takes an ONNX file or a TorchScript "
                          f"file ({', '.join(convert.CONVERTIBLE_SUFFIXES)}); a .pnnx.param "
                          "loads as it is")
    param = convert.to_pnnx(args.model, args.input_shape, show_log=args.show_log or None)
    files = [p for p in sorted(param.parent.iterdir()) if p.name.endswith(convert.KEPT)]
    if args.output_dir:
        folder = Path(args.output_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for path in files:
                shutil.copyfile(path, folder / path.name)
        except OSError as e:
            raise KuiperError(f"-o {folder}: cannot write there ({e.strerror or e})") from None
        param = folder / param.name
        files = [folder / p.name for p in files]
    for path in files:
        print(path)
    print(f"load it with: kuiper.load({str(param)!r}), or `kuiper info {param}`")
    return 0
