"""Write the fuzzer's seed models: small PyTorch modules exported by pnnx (run once, by hand).

    python -m kuiper.fuzz.make_seeds      # needs torch and pnnx; rewrites seeds/

The seeds are real pnnx output, so the mutations start from what users' files look like. Each
module is small (a few KB of weights) and together they cover the operator families and the
`.param` features a hostile file can twist: weights, expressions with `size()`, shape lists,
tuple outputs, outputs nobody reads, several inputs, constants.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

SEEDS = Path(__file__).resolve().parent / "seeds"


def modules():
    import torch
    import torch.nn.functional as F
    from torch import nn

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(4 * 4 * 4, 5)

        def forward(self, x):
            x = self.pool(torch.relu(self.bn(self.conv(x))))
            return F.softmax(self.fc(torch.flatten(x, 1)), dim=1)

    class Expressions(nn.Module):
        def forward(self, x, y):
            z = x * 2.5 + y - 1
            z = torch.sqrt(torch.abs(z)) * torch.exp(-z.clamp(min=0))
            return z.reshape(z.size(0), -1), (x / (y + 3)).max()

    class Resize(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Upsample(scale_factor=2, mode="bilinear")

        def forward(self, x):
            a = self.up(x)
            b = F.interpolate(x, size=(5, 7), mode="nearest")
            return a, F.avg_pool2d(b, 2)

    class Shapes(nn.Module):
        def forward(self, x):
            a, b = torch.chunk(x, 2, dim=1)
            c = torch.cat([b, a * 2], dim=1).permute(0, 2, 3, 1)
            d = c[:, 1:3, :, ::2].contiguous().view(x.size(0), -1)
            values, _ = torch.max(x, dim=2)  # pnnx keeps the unused indices output
            return d, values.transpose(1, 2).unsqueeze(0), x.unbind(1)[0]

    class Norms(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(6)
            self.gn = nn.GroupNorm(2, 4)
            self.lin = nn.Linear(6, 6)

        def forward(self, x):
            y = self.gn(x)
            z = self.ln(self.lin(y.mean(dim=2)))
            return torch.sigmoid(z) * F.gelu(z) + F.silu(y).sum(dim=(2, 3), keepdim=True)[..., 0]

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(4, 4, 3, padding=1, groups=2)
            self.c2 = nn.Conv2d(4, 4, 1)
            self.dw = nn.ConvTranspose2d(4, 2, 2, stride=2)

        def forward(self, x):
            y = F.relu6(self.c2(F.leaky_relu(self.c1(x), 0.1)) + x)
            return self.dw(F.pad(y, (1, 1, 0, 0))), torch.where(y > 0, y, torch.zeros_like(y))

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 6)
            self.gru = nn.GRU(6, 5, batch_first=True)
            self.attn = nn.MultiheadAttention(5, 1, batch_first=True)

        def forward(self, tokens):
            h, _ = self.gru(self.emb(tokens))
            out, _ = self.attn(h, h, h)
            return out.cumsum(dim=1), torch.topk(out, 2, dim=-1)[0]

    return {
        "small_cnn": (SmallCNN(), (torch.rand(1, 3, 8, 8),)),
        "expressions": (Expressions(), (torch.rand(2, 3, 4), torch.rand(2, 3, 4))),
        "resize": (Resize(), (torch.rand(1, 2, 5, 6),)),
        "shapes": (Shapes(), (torch.rand(2, 4, 6, 5),)),
        "norms": (Norms(), (torch.rand(2, 4, 3, 6),)),
        "residual": (Residual(), (torch.rand(1, 4, 6, 6),)),
        "sequence": (Sequence(), (torch.randint(0, 10, (2, 7)),)),
    }


def main() -> None:
    import torch

    from tests.models.export import export_with_pnnx

    torch.manual_seed(0)
    SEEDS.mkdir(exist_ok=True)
    for name, (module, inputs) in modules().items():
        with tempfile.TemporaryDirectory() as tmp:
            param = export_with_pnnx(Path(tmp), module, inputs)
            shutil.copy(param, SEEDS / f"{name}.pnnx.param")
            shutil.copy(param.with_suffix("").with_suffix(".pnnx.bin"), SEEDS / f"{name}.pnnx.bin")
        print(f"wrote {name}")


if __name__ == "__main__":
    main()
