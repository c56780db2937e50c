"""Train the demo model: a tiny CNN on scikit-learn's 8x8 handwritten digits, exported with pnnx.

    python -m kuiper.demo.train_digits          # needs torch==2.13.0, pnnx, scikit-learn

It writes, beside this file (these are package data, committed to the repository):

- `digits.pnnx.param` / `digits.pnnx.bin`: the model, as Kuiper loads it;
- `digits_pnnx.py`: pnnx's PyTorch rebuild of the same graph (`kuiper bench --against torch`);
- `digits_test.npz`: the held-out test split (`images` N x 1 x 8 x 8 float32 in [0, 1],
  `labels`) with PyTorch's `logits` and `predictions` on it, so `kuiper demo` can check that
  Kuiper agrees with PyTorch on every sample without needing PyTorch installed.

Everything is seeded and single-threaded-deterministic, so running it again gives the same
weights on the same machine (floating-point summation order may still differ across CPUs).
The whole run takes a few seconds: 1797 images of 8x8 pixels is a very small data set.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 0
TEST_FRACTION = 0.2
EPOCHS = 20
BATCH = 64


def load_split(seed: int = SEED):
    """Digits as N x 1 x 8 x 8 float32 in [0, 1] (the raw grey levels are 0..16), split 80/20."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    # stratify: every digit appears in the test split in the same proportion as overall
    return train_test_split(images, labels, test_size=TEST_FRACTION, random_state=seed,
                            stratify=labels)


def make_model():
    from torch import nn

    class DigitsNet(nn.Module):
        """Two 3x3 convolutions, one 2x2 max-pool, two linear layers: about 21k parameters.

        The flatten keeps the batch dimension symbolic (start_dim=1), so the exported graph
        runs at any batch size, not just the batch of 1 it was exported with.
        """

        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(),
                nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(),
                nn.MaxPool2d(2),                       # 16 x 8 x 8 -> 16 x 4 x 4
            )
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Linear(16 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
            )

        def forward(self, x):
            return self.classifier(self.features(x))

    return DigitsNet()


def train(model, x_train, y_train, epochs: int = EPOCHS, seed: int = SEED) -> None:
    import torch

    generator = torch.Generator().manual_seed(seed)
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=generator)
        total = 0.0
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(idx)
        if epoch % 10 == 9 or epoch == epochs - 1:
            print(f"epoch {epoch + 1:3d}: training loss {total / len(x):.4f}")
    model.eval()


def export(model, out_dir: Path, name: str = "digits") -> Path:
    """pnnx.export into a scratch folder, then keep only the files Kuiper ships."""
    import pnnx
    import torch

    example = torch.zeros(1, 1, 8, 8)
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        log = io.StringIO()
        try:
            os.chdir(tmp)  # pnnx drops debug files in the working directory
            with torch.no_grad(), contextlib.redirect_stdout(log):
                pnnx.export(model, str(Path(tmp) / f"{name}.pt"), (example,))
        finally:
            os.chdir(cwd)
        for suffix in (".pnnx.param", ".pnnx.bin", "_pnnx.py"):
            src = Path(tmp) / f"{name}{suffix}"
            if not src.exists():
                raise RuntimeError(f"pnnx did not write {src.name}:\n{log.getvalue()[-2000:]}")
            shutil.copyfile(src, out_dir / src.name)
        relocate_torch_module(out_dir / f"{name}_pnnx.py", tmp, name)
    return out_dir / f"{name}.pnnx.param"


def relocate_torch_module(path: Path, export_dir: str, name: str) -> None:
    """pnnx bakes the absolute path of the scratch folder into `<name>_pnnx.py`; make the module
    read the .bin that sits beside it instead, so it works wherever the package is installed."""
    text = re.sub(r"zipfile\.ZipFile\('[^']*'",
                  f"zipfile.ZipFile(os.path.join(os.path.dirname(os.path.abspath(__file__)), "
                  f"'{name}.pnnx.bin')", path.read_text())
    path.write_text(text.replace(str(Path(export_dir)) + "/", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)

    x_train, x_test, y_train, y_test = load_split()
    model = make_model()
    train(model, x_train, y_train, epochs=args.epochs)
    with torch.no_grad():
        logits = model(torch.from_numpy(x_test)).numpy()
    predictions = logits.argmax(axis=1)
    accuracy = float((predictions == y_test).mean())
    print(f"test accuracy: {accuracy:.2%} on {len(y_test)} held-out digits")
    if accuracy < 0.95:
        raise SystemExit(f"accuracy {accuracy:.2%} is below 95%: not exporting")

    args.out.mkdir(parents=True, exist_ok=True)
    param = export(model, args.out)
    np.savez_compressed(args.out / "digits_test.npz", images=x_test, labels=y_test,
                        logits=logits.astype(np.float32), predictions=predictions)
    print(f"wrote {param}, {param.with_name('digits.pnnx.bin').name}, digits_pnnx.py and "
          "digits_test.npz")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
