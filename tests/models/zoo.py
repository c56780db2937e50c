"""The models of the end-to-end tests, written in plain PyTorch (torchvision is not a dependency).

Standard architectures (ResNet-18, MobileNetV2, MobileNetV3-small) follow their papers and the
torchvision layouts; the others are small versions of common shapes of network (a YOLOv5s-style
detector, a UNet, a CRNN, a ViT, a conv + GRU audio model), small enough to export and run in
seconds but with every kind of operator their full-size versions use.

`prepare(model, example)` gives every model weights that exercise the engine: random affine
parameters for the norms and *non-trivial* BatchNorm running statistics, so the conv+BN fusion
pnnx performs is tested with real numbers rather than mean 0 / var 1.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

# --- weights ------------------------------------------------------------------------------------


@torch.no_grad()
def prepare(model: nn.Module, example: torch.Tensor | tuple, seed: int = 0) -> nn.Module:
    """Seeded, eval-mode model whose BatchNorms hold realistic, non-trivial running stats.

    Norm affine parameters are randomised first; then the running statistics are measured by a
    few forward passes in train mode on data like `example` (so every BatchNorm really
    normalises what reaches it in eval mode, and activations stay of order 1 through deep
    stacks); then they get a small random perturbation, so they are not exactly the batch
    statistics either.
    """
    torch.manual_seed(seed)
    examples = example if isinstance(example, tuple) else (example,)
    batch_norms = [m for m in model.modules() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))]
    for m in model.modules():
        affine = getattr(m, "weight", None) is not None
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)) and affine:
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_(0.0, 0.2)
    for m in batch_norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    model.train()
    for _ in range(2):
        model(*[calibration_batch(t) for t in examples])
    for m in batch_norms:
        # Perturb after measuring (a BatchNorm's statistics depend on every layer before it).
        m.running_mean.add_(torch.randn_like(m.running_mean) * m.running_var.sqrt() * 0.1)
        m.running_var.mul_(torch.empty_like(m.running_var).uniform_(0.8, 1.25))
    return model.eval()


def calibration_batch(example: torch.Tensor) -> torch.Tensor:
    """Random data distributed like `example` (images in [0, 1) or standard normal features):
    statistics measured on another distribution would let activations drift far from order 1,
    and then float32 rounding, not the engine, dominates the comparison."""
    if not example.is_floating_point():
        return example
    shape = (max(2, example.shape[0]), *example.shape[1:])
    return torch.rand(shape) if example.min() >= 0 else torch.randn(shape)


def make(cls: type[nn.Module], example: torch.Tensor | tuple, seed: int = 0, **kwargs
         ) -> nn.Module:
    """Build `cls(**kwargs)` from a fixed seed and `prepare` it: the same weights every run, so
    a model exported by an earlier run (KUIPER_EXPORTS) still matches the module in memory."""
    torch.manual_seed(seed)
    return prepare(cls(**kwargs), example, seed)


def conv_bn(cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups,
                                         bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# --- ResNet-18 ----------------------------------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride)
        self.conv2 = conv_bn(cout, cout, 3, 1, act=None)
        self.down = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout \
            else None

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        return F.relu(self.conv2(self.conv1(x)) + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for k, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
            stride = 1 if k == 0 else 2
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


# --- ResNet-50 ----------------------------------------------------------------------------------

class Bottleneck50(nn.Module):
    """ResNet-50's block: 1x1 down, 3x3 (the stride), 1x1 up to 4x, residual."""

    def __init__(self, cin: int, mid: int, stride: int):
        super().__init__()
        cout = 4 * mid
        self.body = nn.Sequential(conv_bn(cin, mid, 1), conv_bn(mid, mid, 3, stride),
                                  conv_bn(mid, cout, 1, act=None))
        self.down = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout \
            else None

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        return F.relu(self.body(x) + identity)


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for k, (mid, count) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
            for i in range(count):
                blocks.append(Bottleneck50(cin, mid, 2 if i == 0 and k > 0 else 1))
                cin = 4 * mid
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


# --- MobileNetV2 --------------------------------------------------------------------------------

def make_divisible(v: float, divisor: int = 8) -> int:
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(conv_bn(cin, hidden, 1, act=nn.ReLU6))
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   conv_bn(hidden, cout, 1, act=None)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, stride s) from the paper's table 2
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0):
        super().__init__()
        cin = make_divisible(32 * width_mult)
        last = make_divisible(1280 * max(1.0, width_mult))
        layers: list[nn.Module] = [conv_bn(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in self.SETTINGS:
            cout = make_divisible(c * width_mult)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(conv_bn(cin, last, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# --- MobileNetV3-small --------------------------------------------------------------------------

class SqueezeExcite(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        squeeze = make_divisible(channels // 4)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class V3Block(nn.Module):
    def __init__(self, cin, k, exp, cout, se, act, stride):
        super().__init__()
        layers: list[nn.Module] = []
        if exp != cin:
            layers.append(conv_bn(cin, exp, 1, act=act))
        layers.append(conv_bn(exp, exp, k, stride, groups=exp, act=act))
        if se:
            layers.append(SqueezeExcite(exp))
        layers.append(conv_bn(exp, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV3Small(nn.Module):
    HS, RE = nn.Hardswish, nn.ReLU
    # (kernel, expanded, out, SE, activation, stride) from the paper's table 2
    SETTINGS = ((3, 16, 16, True, RE, 2), (3, 72, 24, False, RE, 2), (3, 88, 24, False, RE, 1),
                (5, 96, 40, True, HS, 2), (5, 240, 40, True, HS, 1), (5, 240, 40, True, HS, 1),
                (5, 120, 48, True, HS, 1), (5, 144, 48, True, HS, 1), (5, 288, 96, True, HS, 2),
                (5, 576, 96, True, HS, 1), (5, 576, 96, True, HS, 1))

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, 16, 3, 2, act=nn.Hardswish)]
        cin = 16
        for k, exp, cout, se, act, s in self.SETTINGS:
            layers.append(V3Block(cin, k, exp, cout, se, act, s))
            cin = cout
        layers.append(conv_bn(cin, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(1024, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# --- YOLOv5s-style detector ---------------------------------------------------------------------

def cbs(cin: int, cout: int, k: int = 1, s: int = 1) -> nn.Sequential:
    """YOLOv5's `Conv`: conv + BN + SiLU."""
    return conv_bn(cin, cout, k, s, act=nn.SiLU)


class Focus(nn.Module):
    """Space-to-depth by strided slicing (YOLOv5 before v6), then a conv."""

    def __init__(self, cin: int, cout: int, k: int = 3):
        super().__init__()
        self.conv = cbs(cin * 4, cout, k)

    def forward(self, x):
        return self.conv(torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                                    x[..., 1::2, 1::2]], 1))


class Bottleneck(nn.Module):
    def __init__(self, c: int, shortcut: bool = True):
        super().__init__()
        self.cv1, self.cv2 = cbs(c, c, 1), cbs(c, c, 3)
        self.add = shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, cin: int, cout: int, n: int = 1, shortcut: bool = True):
        super().__init__()
        hidden = cout // 2
        self.cv1, self.cv2 = cbs(cin, hidden), cbs(cin, hidden)
        self.cv3 = cbs(2 * hidden, cout)
        self.m = nn.Sequential(*[Bottleneck(hidden, shortcut) for _ in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class SPPF(nn.Module):
    def __init__(self, cin: int, cout: int, k: int = 5):
        super().__init__()
        hidden = cin // 2
        self.cv1, self.cv2 = cbs(cin, hidden), cbs(hidden * 4, cout)
        self.pool = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))


class Detect(nn.Module):
    """YOLOv5's inference head: per level, sigmoid, grid offsets and anchor scaling."""

    ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119),
               (116, 90, 156, 198, 373, 326))
    STRIDES = (8, 16, 32)

    def __init__(self, num_classes: int, channels: list[int]):
        super().__init__()
        self.no, self.na = num_classes + 5, 3
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in channels)
        self.register_buffer("anchor_grid", torch.tensor(self.ANCHORS, dtype=torch.float32)
                             .view(3, 1, 3, 1, 1, 2))

    def forward(self, xs):
        z = []
        for i, x in enumerate(xs):
            x = self.m[i](x)
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            # on x's device: the accuracy contract runs this module on a GPU too
            yv, xv = torch.meshgrid(torch.arange(ny, device=x.device),
                                    torch.arange(nx, device=x.device), indexing="ij")
            grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
            y = x.sigmoid()
            xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.STRIDES[i]
            wh = (y[..., 2:4] * 2) ** 2 * self.anchor_grid[i]
            y = torch.cat((xy, wh, y[..., 4:]), -1)
            z.append(y.view(bs, -1, self.no))
        return torch.cat(z, 1)


class YoloV5Small(nn.Module):
    """Backbone (Focus, C3, SPPF), PAN neck (nearest upsample + cat), Detect head.

    `width` is the channel count of the first layer (32 in YOLOv5s); depth is YOLOv5s's divided
    by three to keep the tests fast.
    """

    def __init__(self, num_classes: int = 3, width: int = 8):
        super().__init__()
        w = [width * m for m in (1, 2, 4, 8, 16)]
        self.focus = Focus(3, w[0])
        self.b1 = nn.Sequential(cbs(w[0], w[1], 3, 2), C3(w[1], w[1]))
        self.b2 = nn.Sequential(cbs(w[1], w[2], 3, 2), C3(w[2], w[2], 2))    # P3 /8
        self.b3 = nn.Sequential(cbs(w[2], w[3], 3, 2), C3(w[3], w[3]))       # P4 /16
        self.b4 = nn.Sequential(cbs(w[3], w[4], 3, 2), C3(w[4], w[4]), SPPF(w[4], w[4]))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h1, self.h1c3 = cbs(w[4], w[3]), C3(w[4], w[3], shortcut=False)
        self.h2, self.h2c3 = cbs(w[3], w[2]), C3(w[3], w[2], shortcut=False)
        self.d1, self.d1c3 = cbs(w[2], w[2], 3, 2), C3(w[3], w[3], shortcut=False)
        self.d2, self.d2c3 = cbs(w[3], w[3], 3, 2), C3(w[4], w[4], shortcut=False)
        self.detect = Detect(num_classes, [w[2], w[3], w[4]])

    def forward(self, x):
        p3 = self.b2(self.b1(self.focus(x)))
        p4 = self.b3(p3)
        p5 = self.b4(p4)
        t5 = self.h1(p5)
        t4 = self.h2(self.h1c3(torch.cat([self.up(t5), p4], 1)))
        n3 = self.h2c3(torch.cat([self.up(t4), p3], 1))
        n4 = self.d1c3(torch.cat([self.d1(n3), t4], 1))
        n5 = self.d2c3(torch.cat([self.d2(n4), t5], 1))
        return self.detect([n3, n4, n5])


# --- UNet ---------------------------------------------------------------------------------------

class DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int):
        super().__init__(conv_bn(cin, cout), conv_bn(cout, cout))


class UNet(nn.Module):
    """Three downsamplings; the two deepest upsamplings are transposed convolutions, the last
    one is a bilinear upsample followed by a 1x1 conv (both styles are common)."""

    def __init__(self, cin: int = 3, classes: int = 2, base: int = 8):
        super().__init__()
        c = [base, base * 2, base * 4, base * 8]
        self.inc = DoubleConv(cin, c[0])
        self.downs = nn.ModuleList(DoubleConv(c[i], c[i + 1]) for i in range(3))
        self.up3 = nn.ConvTranspose2d(c[3], c[2], 2, 2)
        self.dec3 = DoubleConv(c[3], c[2])
        self.up2 = nn.ConvTranspose2d(c[2], c[1], 3, 2, padding=1, output_padding=1)
        self.dec2 = DoubleConv(c[2], c[1])
        self.up1 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear",
                                             align_corners=False), nn.Conv2d(c[1], c[0], 1))
        self.dec1 = DoubleConv(c[1], c[0])
        self.head = nn.Conv2d(c[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(F.max_pool2d(skips[-1], 2)))
        x = self.dec3(torch.cat([skips[2], self.up3(skips[3])], 1))
        x = self.dec2(torch.cat([skips[1], self.up2(x)], 1))
        x = self.dec1(torch.cat([skips[0], self.up1(x)], 1))
        return self.head(x)


# --- CRNN ---------------------------------------------------------------------------------------

class CRNN(nn.Module):
    """Text-line recogniser: conv stack to height 1, 2-layer BiLSTM over the width, linear."""

    def __init__(self, classes: int = 11, hidden: int = 32, base: int = 16):
        super().__init__()
        c = [base, base * 2, base * 4]
        self.cnn = nn.Sequential(
            conv_bn(1, c[0]), nn.MaxPool2d(2, 2),                       # H/2,  W/2
            conv_bn(c[0], c[1]), nn.MaxPool2d(2, 2),                    # H/4,  W/4
            conv_bn(c[1], c[2]), conv_bn(c[2], c[2]),
            nn.MaxPool2d((2, 1), (2, 1)),                               # H/8,  W/4
            conv_bn(c[2], c[2]), nn.MaxPool2d((4, 1), (4, 1)))          # H/32, W/4
        self.rnn = nn.LSTM(c[2], hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):                    # x: N x 1 x 32 x W
        f = self.cnn(x).squeeze(2)           # N x C x T
        f = f.permute(2, 0, 1)               # T x N x C (sequence first, as classic CRNN)
        y, _ = self.rnn(f)
        return F.log_softmax(self.fc(y), dim=2)


# --- ViT-tiny -----------------------------------------------------------------------------------

class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * mlp_ratio), nn.GELU(),
                                 nn.Linear(dim * mlp_ratio, dim))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class ViTTiny(nn.Module):
    """Patch conv, class token, position embedding, pre-norm encoder blocks, linear head."""

    def __init__(self, image: int = 32, patch: int = 4, dim: int = 48, depth: int = 2,
                 heads: int = 3, classes: int = 10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        tokens = (image // patch) ** 2 + 1
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)                    # N x P x D
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1)
        x = self.norm(self.blocks(x + self.pos_embed))
        return self.head(x[:, 0])


class ViT(ViTTiny):
    """ViT-S/16 by default (224 pixels, 16-pixel patches: 197 tokens, 384 wide, 6 heads of 64,
    12 blocks): the same architecture as ViTTiny, at its real size."""

    def __init__(self, image: int = 224, patch: int = 16, dim: int = 384, depth: int = 12,
                 heads: int = 6, classes: int = 1000):
        super().__init__(image, patch, dim, depth, heads, classes)


class BertSelfAttention(nn.Module):
    """Self-attention as Hugging Face's BERT writes it: three Linear projections, heads by
    view/permute, matmul with k.transpose, a scale, the additive mask, softmax, matmul."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head = heads, dim // heads
        self.query, self.key, self.value = (nn.Linear(dim, dim) for _ in range(3))
        self.out = nn.Linear(dim, dim)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head) + mask
        context = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3)
        b, t = context.shape[:2]
        return self.out(context.contiguous().view(b, t, -1))


class BertLayer(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attention = BertSelfAttention(dim, heads)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x, mask):
        x = self.ln1(x + self.attention(x, mask))
        return self.ln2(x + self.down(F.gelu(self.up(x))))


class BertEncoder(nn.Module):
    """A BERT-base-like encoder (post-norm, 12 blocks of 768, 12 heads) over embeddings given
    as input, with BERT's extended additive mask (N, 1, 1, tokens)."""

    def __init__(self, dim: int = 768, heads: int = 12, depth: int = 12):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer(dim, heads) for _ in range(depth))

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return x


# --- audio: 1-D conv + GRU ------------------------------------------------------------------------

class AudioGRU(nn.Module):
    """Keyword-spotting style: mel frames -> 1-D convs -> 2-layer GRU -> per-frame scores and a
    clip-level score (two outputs)."""

    def __init__(self, mels: int = 20, hidden: int = 24, classes: int = 6):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(mels, 32, 5, padding=2, bias=False), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm1d(32),
            nn.ReLU())
        self.gru = nn.GRU(32, hidden, num_layers=2, batch_first=True)
        self.frame = nn.Linear(hidden, classes)

    def forward(self, x):                    # x: N x mels x T
        y, _ = self.gru(self.conv(x).transpose(1, 2))
        frames = self.frame(y)               # N x T/2 x classes
        return frames, frames.mean(1)


# --- small nets for the ONNX route ----------------------------------------------------------------

class OnnxCNN(nn.Module):
    """A classifier with two outputs (logits and probabilities)."""

    def __init__(self, classes: int = 7):
        super().__init__()
        self.body = nn.Sequential(conv_bn(3, 16), nn.MaxPool2d(2), conv_bn(16, 24, 3, 2,
                                                                          act=nn.Hardswish),
                                  nn.Conv2d(24, 32, 3, padding=1), nn.LeakyReLU(0.1),
                                  nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        logits = self.fc(torch.flatten(self.body(x), 1))
        return logits, F.softmax(logits, dim=1)


class OnnxMLPMixer(nn.Module):
    """Tokens from a patch conv, LayerNorm + GELU MLPs, mean pooling: sequence ops via ONNX."""

    def __init__(self, dim: int = 32, classes: int = 5):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, 4)
        self.ln = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        t = t + self.mlp(self.ln(t))
        return torch.sigmoid(self.head(t.mean(1)))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = [
    "CRNN",
    "AudioGRU",
    "MobileNetV2",
    "MobileNetV3Small",
    "OnnxCNN",
    "OnnxMLPMixer",
    "ResNet18",
    "UNet",
    "ViTTiny",
    "YoloV5Small",
    "count_parameters",
    "make",
    "prepare",
]
