#!/usr/bin/env python3
"""Exports a small 1-D audio decoder with seeded random weights, as torch.onnx.export writes it: two depthwise
ConvTranspose1d x2 upsamplers (kernel 4, stride 2, padding 1, groups = C: rank-3 weights [C, 1, 4]) between 1-D
Convs, and one dense ConvTranspose1d x4 (C -> C/2, kernel 8, stride 4, padding 2), HiFi-GAN's generator's kind.
dwdeconv-rewrite rewrites each depthwise one as the 2-D rewrite of its input unsqueezed to [N, C, 1, L] (phase Convs
interleaved along the time axis) and squeezed back, and keeps the dense one as dense (before: all three kept as
"not 2-D").

Usage: python3 examples/export_conv1d_upsampler.py OUT.onnx [--channels 64] [--length 100] [--opset 13]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.head = nn.Conv1d(1, c, 7, padding=3)
        self.up1 = nn.ConvTranspose1d(c, c, 4, stride=2, padding=1, groups=c)
        self.mix1 = nn.Conv1d(c, c, 3, padding=1)
        self.up2 = nn.ConvTranspose1d(c, c, 4, stride=2, padding=1, groups=c)
        self.mix2 = nn.Conv1d(c, c, 3, padding=1)
        self.up3 = nn.ConvTranspose1d(c, c // 2, 8, stride=4, padding=2)  # dense, as HiFi-GAN's ups
        self.tail = nn.Conv1d(c // 2, 1, 7, padding=3)

    def forward(self, x):
        x = self.head(x)
        x = torch.nn.functional.leaky_relu(self.mix1(self.up1(x)), 0.1)
        x = torch.nn.functional.leaky_relu(self.mix2(self.up2(x)), 0.1)
        return torch.tanh(self.tail(self.up3(x)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Decoder(args.channels).eval()
    x = torch.randn(1, 1, args.length)
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["features"], output_names=["audio"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
