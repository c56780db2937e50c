"""Export the GPU benchmark set (the README's GPU table) as `.pnnx.param` files to carry.

    python -m tests.benchmarks.export_gpu_set OUT_DIR

Each model becomes OUT_DIR/<name>/model.pnnx.param with pnnx's `model_pnnx.py` beside it (what
`kuiper bench --against torch-...` runs); the weights (`.pnnx.bin`) are left behind: the GPU
machine writes seeded random ones with randbin.py (too large to carry, and their values do not
change the speed). `manifest.txt` lists each model with the input shape to bench it at.
Needs torch 2.13.0 and pnnx (the test extra).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch

from tests.models import zoo
from tests.models.export import export_with_pnnx

# name: (module class, kwargs, example inputs' shapes, bench input shapes)
# Batch 32 ViT gets its own export: the traced class token is expanded to the export's batch.
MODELS = {
    "resnet18": (zoo.ResNet18, {}, [(1, 3, 224, 224)], [(1, 3, 224, 224)]),
    "resnet18_b32": (zoo.ResNet18, {}, [(1, 3, 224, 224)], [(32, 3, 224, 224)]),
    "mobilenetv2": (zoo.MobileNetV2, {}, [(1, 3, 224, 224)], [(1, 3, 224, 224)]),
    "yolov5s_640": (zoo.YoloV5Small, {"num_classes": 80, "width": 32}, [(1, 3, 640, 640)],
                    [(1, 3, 640, 640)]),
    "unet_256": (zoo.UNet, {"base": 32}, [(1, 3, 256, 256)], [(1, 3, 256, 256)]),
    "vit_s16": (zoo.ViT, {}, [(1, 3, 224, 224)], [(1, 3, 224, 224)]),
    "vit_s16_b32": (zoo.ViT, {}, [(32, 3, 224, 224)], [(32, 3, 224, 224)]),
    "resnet50_b32": (zoo.ResNet50, {}, [(1, 3, 224, 224)], [(32, 3, 224, 224)]),
    "bert_128": (zoo.BertEncoder, {}, [(1, 128, 768), (1, 1, 1, 128)],
                 [(1, 128, 768), (1, 1, 1, 128)]),
    "bert_512": (zoo.BertEncoder, {}, [(1, 512, 768), (1, 1, 1, 512)],
                 [(1, 512, 768), (1, 1, 1, 512)]),
}


def export_all(out: Path, names=None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, (cls, kwargs, example, bench) in MODELS.items():
        if names and name not in names:
            continue
        torch.manual_seed(0)
        module = cls(**kwargs).eval()
        inputs = tuple(torch.zeros(s) if len(s) == 4 and s[1] == 1 else torch.randn(*s)
                       for s in example)
        folder = out / name
        # nn.MultiheadAttention traces differently at each call: pnnx's check must be off
        extra = {"check_trace": False} if cls is zoo.ViT else {}
        param = export_with_pnnx(folder, module, inputs if len(inputs) > 1 else inputs[0],
                                 **extra)
        for path in folder.iterdir():   # keep the .param and pnnx's rebuild of the model
            if path.name not in (param.name, "model_pnnx.py"):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        shape = ",".join("x".join(map(str, s)) for s in bench)
        lines.append(f"{name} {name}/{param.name} {shape}")
        print(lines[-1], flush=True)
    (out / "manifest.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    export_all(Path(sys.argv[1]), sys.argv[2:])
