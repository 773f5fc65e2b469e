#!/usr/bin/env python3
"""Optional: where dwdeconv-rewrite sits after torch.onnx.export.

dwdeconv-rewrite itself does not need Python: it is a C++ binary that reads and writes ONNX files. This script
only shows the usual source of the models it rewrites, a PyTorch module whose x2 upsampler is a depthwise
ConvTranspose2d (groups == in_channels == out_channels, kernel 4, stride 2, padding 1), as in StyleGAN-style
generators and MI-GAN.

Not run in this repository's CI or on its build machine: PyTorch is not installed there. To try it:

    python3 -m pip install torch onnx        # in a virtualenv of your own
    python3 examples/export_pytorch.py upsampler.onnx
    examples/pipeline.sh upsampler.onnx upsampler.xnn.onnx

or, with the tool alone:

    dwdeconv-rewrite upsampler.onnx -o upsampler.xnn.onnx --verify --report upsampler.json

The export uses a fixed input shape, so --verify needs no --input-shape. If you export with dynamic height
and width instead (dynamic_axes), pass the shape to verify with, e.g. --input-shape image=1x16x64x64.
"""
import argparse
import sys

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
    print(f"wrote {args.output}; next:", file=sys.stderr)
    print(f"  examples/pipeline.sh {args.output} {args.output.removesuffix('.onnx')}.xnn.onnx", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
