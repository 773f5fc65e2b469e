#!/usr/bin/env python3
"""Exports Mimi's upsampler (kyutai-labs/moshi, the audio codec of Moshi) with seeded random weights, as
torch.onnx.export writes it: ConvTrUpsample1d from the codec's 12.5 Hz frame rate to its encoder's 25 Hz.

Mimi builds it (moshi/models/compression.py, MimiModel) as ConvTrUpsample1d(2, dimension=512, learnt=True,
causal=True, channel_wise=True): a depthwise ConvTranspose1d (groups = 512, kernel 2 * stride = 4, stride 2, no bias)
inside StreamingConvTranspose1d, whose causal, non-streaming forward crops the kernel's overlap, k - s = 2 samples,
off the end (unpad1d(y, (0, k - s))). The tool folds that crop into the phases (form upsample1d).

Written after moshi/modules/resample.py (ConvTrUpsample1d) and moshi/modules/conv.py (StreamingConvTranspose1d,
unpad1d). Differences, none in what is exported: no streaming state (export runs the one-shot path, state None); no
weight normalisation (Mimi's convolutions use norm "none").

Usage: python3 examples/export_mimi.py OUT.onnx [--frames 125] [--dimension 512] [--stride 2] [--opset 17]
  --frames: latent frames at 12.5 Hz (125: ten seconds), the input [1, dimension, frames].
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
from torch import nn


def unpad1d(x, paddings):
    """moshi's: removes padding_left and padding_right samples from the last axis."""
    padding_left, padding_right = paddings
    end = x.shape[-1] - padding_right
    return x[..., padding_left:end]


class StreamingConvTranspose1d(nn.Module):
    """The causal, non-streaming path: ConvTranspose1d, then the last k - s samples cropped."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, bias):
        super().__init__()
        self.convtr = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride, groups=groups, bias=bias)

    def forward(self, x):
        k, s = self.convtr.kernel_size[0], self.convtr.stride[0]
        return unpad1d(self.convtr(x), (0, k - s))


class ConvTrUpsample1d(nn.Module):
    """learnt and channel_wise, as Mimi sets them."""

    def __init__(self, stride, dimension):
        super().__init__()
        self.convtr = StreamingConvTranspose1d(dimension, dimension, 2 * stride, stride, groups=dimension, bias=False)

    def forward(self, x):
        return self.convtr(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--frames", type=int, default=125, help="latent frames at 12.5 Hz (125: ten seconds)")
    parser.add_argument("--dimension", type=int, default=512)
    parser.add_argument("--stride", type=int, default=2)
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()
    for name, value in (("--frames", args.frames), ("--dimension", args.dimension), ("--stride", args.stride)):
        if value < 1:
            parser.error(f"{name} must be at least 1, got {value}")
    torch.manual_seed(0)
    model = ConvTrUpsample1d(args.stride, args.dimension).eval()
    x = torch.randn(1, args.dimension, args.frames)
    with torch.no_grad():
        torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["latent"], output_names=["upsampled"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
