#!/usr/bin/env python3
"""Optional: where dwdeconv-rewrite sits after torch.onnx.export.

dwdeconv-rewrite itself does not need Python: it is a C++ binary that reads and writes ONNX files. This script
only shows the usual source of the models it rewrites, a PyTorch module whose x2 upsampler is a depthwise
ConvTranspose2d (groups == in_channels == out_channels, kernel 4, stride 2, padding 1), as in StyleGAN-style
generators and MI-GAN.

Run with Debian bookworm's PyTorch 1.13 (apt-get install python3-torch python3-onnx), or any recent one:

    python3 examples/export_pytorch.py upsampler.onnx

It prints the next command, with the path of the tool it found (build/cli/dwdeconv-rewrite in this checkout,
else dwdeconv-rewrite on PATH), e.g.

    build/cli/dwdeconv-rewrite upsampler.onnx -o upsampler.xnn.onnx --verify --bench

The export uses a fixed input shape, so --verify needs no --input-shape. If you export with dynamic height
and width instead (dynamic_axes), pass the shape to verify with, e.g. --input-shape image:1,16,64,64.
"""
import argparse
import os
import shutil
import sys
from pathlib import Path

import torch
from torch import nn


class DepthwiseUpsample(nn.Module):
    """x2 upsampling by a learned depthwise transposed convolution, initialised to a bilinear filter."""

    def __init__(self, channels: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(channels, channels, kernel_size=4, stride=2, padding=1, groups=channels,
                                     bias=True)
        taps = torch.tensor([1.0, 3.0, 3.0, 1.0]) / 4.0  # separable bilinear x2 kernel
        with torch.no_grad():
            self.up.weight.copy_((taps[:, None] * taps[None, :]).expand(channels, 1, 4, 4))
            self.up.bias.zero_()

    def forward(self, x):
        return self.up(x)


class TinyGenerator(nn.Module):
    """A few conv blocks, each followed by a depthwise x2 upsample, then a 1x1 projection to RGB."""

    def __init__(self, channels: int = 16, blocks: int = 3):
        super().__init__()
        layers = []
        for _ in range(blocks):
            layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.LeakyReLU(0.2), DepthwiseUpsample(channels)]
        self.body = nn.Sequential(*layers)
        self.to_rgb = nn.Conv2d(channels, 3, 1)

    def forward(self, image):
        return torch.tanh(self.to_rgb(self.body(image)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", default="upsampler.onnx", help="ONNX file to write")
    parser.add_argument("--size", type=int, default=32, help="input height and width (default 32)")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TinyGenerator().eval()
    example = torch.randn(1, 16, args.size, args.size)
    # Opset 17: the newest opset Debian bookworm's libonnx (1.12), which the tool validates with, knows fully.
    torch.onnx.export(model, (example,), args.output, input_names=["image"], output_names=["rgb"],
                      opset_version=17)
    rewritten = (args.output[:-len(".onnx")] if args.output.endswith(".onnx") else args.output) + ".xnn.onnx"
    print(f"wrote {args.output}; next:", file=sys.stderr)
    print(f"  {tool_command()} {args.output} -o {rewritten} --verify --bench", file=sys.stderr)
    return 0


def tool_command() -> str:
    """How to call the tool from here: this checkout's build, else the one on PATH, else how to build it."""
    built = Path(__file__).resolve().parent.parent / "build" / "cli" / "dwdeconv-rewrite"
    if built.is_file() and os.access(built, os.X_OK):
        relative = os.path.relpath(built)  # holds a '/', so the shell never looks it up on PATH
        return str(built) if relative.startswith("..") else relative
    if shutil.which("dwdeconv-rewrite"):
        return "dwdeconv-rewrite"
    return f"(build it first: see {Path(__file__).resolve().parent.parent / 'README.md'}) dwdeconv-rewrite"


if __name__ == "__main__":
    sys.exit(main())
