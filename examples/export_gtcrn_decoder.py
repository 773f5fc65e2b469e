#!/usr/bin/env python3
"""Exports GTCRN's decoder (Xiaobin-Rong/gtcrn, speech enhancement) with seeded random weights, as torch.onnx.export
writes it: three GTConvBlocks with use_deconv=True, whose depth_conv is a depthwise ConvTranspose2d kernel (3, 3),
stride 1, padding (2*d, 1) and dilation (d, 1) for d = 5, 2, 1, after a causal pad of (k-1)*d frames; then the
ConvBlocks that double the frequency axis (grouped ConvTranspose2d (1, 5), stride (1, 2): not depthwise, kept).
dwdeconv-rewrite rewrites each depth_conv into one dilated depthwise Conv with the kernel flipped (before: kept as
"dilation > 1" and "not a clean upscale: output is 1*H-2").

Written after gtcrn.py's GTConvBlock and Decoder (point_conv1, depth_conv and point_conv2 are ConvTranspose2d when
use_deconv, as there; BatchNorm and PReLU after each). Differences, for a small test model: SFE (an Unfold of three
frequency bins) and TRA (a GRU attention over time) are left out, so point_conv1 reads the block's half of the
channels directly (C/2 -> 16 instead of 3*C/2 -> 16); the BatchNorm statistics are random so that the folded
BatchNorms are not identities; the input is --frames x 33 bins (GTCRN's decoder sees 33 after its ERB compression).

Usage: python3 examples/export_gtcrn_decoder.py OUT.onnx [--frames 63] [--opset 13]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
from torch import nn

from export_common import randomise_batchnorm


class GTConvBlock(nn.Module):
    """Group Temporal Convolution, use_deconv=True (GTCRN's, without SFE and TRA)."""

    def __init__(self, in_channels, hidden_channels, kernel_size, stride, padding, dilation):
        super().__init__()
        self.pad_size = (kernel_size[0] - 1) * dilation[0]
        self.point_conv1 = nn.ConvTranspose2d(in_channels // 2, hidden_channels, 1)
        self.point_bn1 = nn.BatchNorm2d(hidden_channels)
        self.point_act = nn.PReLU()
        self.depth_conv = nn.ConvTranspose2d(hidden_channels, hidden_channels, kernel_size, stride=stride, padding=padding,
                                             dilation=dilation, groups=hidden_channels)
        self.depth_bn = nn.BatchNorm2d(hidden_channels)
        self.depth_act = nn.PReLU()
        self.point_conv2 = nn.ConvTranspose2d(hidden_channels, in_channels // 2, 1)
        self.point_bn2 = nn.BatchNorm2d(in_channels // 2)

    def shuffle(self, x1, x2):
        x = torch.stack([x1, x2], dim=1)
        x = x.transpose(1, 2).contiguous()
        return x.reshape(x.shape[0], -1, x.shape[3], x.shape[4])

    def forward(self, x):
        x1, x2 = torch.chunk(x, chunks=2, dim=1)
        h1 = self.point_act(self.point_bn1(self.point_conv1(x1)))
        h1 = nn.functional.pad(h1, [0, 0, self.pad_size, 0])
        h1 = self.depth_act(self.depth_bn(self.depth_conv(h1)))
        h1 = self.point_bn2(self.point_conv2(h1))
        return self.shuffle(h1, x2)


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups=1, is_last=False):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding, groups=groups)
        self.bn = nn.BatchNorm2d(out_channels)
        self.act = nn.Tanh() if is_last else nn.PReLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.de_convs = nn.ModuleList([
            GTConvBlock(16, 16, (3, 3), stride=(1, 1), padding=(2 * 5, 1), dilation=(5, 1)),
            GTConvBlock(16, 16, (3, 3), stride=(1, 1), padding=(2 * 2, 1), dilation=(2, 1)),
            GTConvBlock(16, 16, (3, 3), stride=(1, 1), padding=(2 * 1, 1), dilation=(1, 1)),
            ConvBlock(16, 16, (1, 5), stride=(1, 2), padding=(0, 2), groups=2),
            ConvBlock(16, 2, (1, 5), stride=(1, 2), padding=(0, 2), is_last=True),
        ])

    def forward(self, x):
        for layer in self.de_convs:
            x = layer(x)
        return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--frames", type=int, default=63)
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Decoder()
    model.apply(randomise_batchnorm)
    model.eval()
    x = torch.randn(1, 16, args.frames, 33)
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["features"], output_names=["mask"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
