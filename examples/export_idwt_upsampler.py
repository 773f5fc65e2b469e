#!/usr/bin/env python3
"""Exports a MobileStyleGAN-style generator tail (bes-dev/MobileStyleGAN) with seeded random weights, as
torch.onnx.export writes it: its images are built by inverse Haar wavelet transforms (pytorch_wavelets' DWTInverse
with wave='db1', mode='zero', which MobileStyleGAN's IDWTUpsaplme uses), and each IDWT level is six depthwise
ConvTranspose2d: kernel (2, 1) with stride (2, 1) for the rows and kernel (1, 2) with stride (1, 2) for the columns.
dwdeconv-rewrite rewrites them (before: kept as "strides differ per axis (2 vs 1)"): the low-pass filter's two equal
taps make every phase the same (one Conv and a nearest Resize by (2, 1) or (1, 2)), the high-pass filter's do not
(two phase Convs interleaved along the strided axis).

Written after pytorch_wavelets' sfb1d (the synthesis filter bank: conv_transpose2d(lo, g0) + conv_transpose2d(hi, g1),
groups = C, padding L - 2 = 0 for Haar) and DWTInverse's per-level loop (columns, then rows), and MobileStyleGAN's
IDWTUpsaplme (a 1x1 Conv to 4x the channels, split into the low band and the three high bands, IDWT). Differences, for
a small test model: --levels upsampling stages of --channels channels (MobileStyleGAN: 5 levels, 512 to 32 channels), a
3x3 Conv between levels instead of its modulated convolutions, and no style input.

Usage: python3 examples/export_idwt_upsampler.py OUT.onnx [--channels 64] [--levels 3] [--size 8] [--opset 13]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


def sfb1d(lo, hi, g0, g1, dim):
    """pytorch_wavelets.lowlevel.sfb1d, mode 'zero', for a 2-tap filter."""
    channels = lo.shape[1]
    shape = [1, 1, 1, 1]
    shape[dim] = g0.numel()
    g0 = torch.cat([g0.reshape(*shape)] * channels, dim=0)
    g1 = torch.cat([g1.reshape(*shape)] * channels, dim=0)
    stride = (2, 1) if dim == 2 else (1, 2)
    return (F.conv_transpose2d(lo, g0, stride=stride, groups=channels) +
            F.conv_transpose2d(hi, g1, stride=stride, groups=channels))


class IDWTUpsample(nn.Module):
    """MobileStyleGAN's IDWTUpsaplme: a 1x1 Conv to the four bands, then one inverse Haar level (2H x 2W)."""

    def __init__(self, channels):
        super().__init__()
        self.to_bands = nn.Conv2d(channels, 4 * channels, 1)
        s = 1 / math.sqrt(2)
        self.register_buffer("g0", torch.tensor([s, s]))
        self.register_buffer("g1", torch.tensor([s, -s]))

    def forward(self, x):
        ll, lh, hl, hh = torch.chunk(self.to_bands(x), 4, dim=1)
        lo = sfb1d(ll, lh, self.g0, self.g1, dim=2)  # columns: H doubles
        hi = sfb1d(hl, hh, self.g0, self.g1, dim=2)
        return sfb1d(lo, hi, self.g0, self.g1, dim=3)  # rows: W doubles


class Generator(nn.Module):
    def __init__(self, channels, levels):
        super().__init__()
        self.head = nn.Conv2d(3, channels, 3, padding=1)
        self.ups = nn.ModuleList([IDWTUpsample(channels) for _ in range(levels)])
        self.convs = nn.ModuleList([nn.Conv2d(channels, channels, 3, padding=1) for _ in range(levels)])
        self.tail = nn.Conv2d(channels, 3, 1)

    def forward(self, x):
        x = self.head(x)
        for up, conv in zip(self.ups, self.convs):
            x = F.leaky_relu(conv(up(x)), 0.2)
        return self.tail(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--levels", type=int, default=3)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Generator(args.channels, args.levels).eval()
    x = torch.randn(1, 3, args.size, args.size)
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["latent_image"], output_names=["rgb"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
