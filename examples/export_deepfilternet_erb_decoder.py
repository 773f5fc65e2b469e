#!/usr/bin/env python3
"""Exports DeepFilterNet3's ERB decoder (Rikorose/DeepFilterNet, speech enhancement) with seeded random weights, as
torch.onnx.export writes it: its two frequency upsamplers are convkxf(..., fstride=2), a ConvTranspose2dNormAct whose
separable (depthwise, groups = gcd(C, C) = C) ConvTranspose2d has kernel (1, 3), stride (1, 2), padding (0, 1) and
output_padding (0, 1), then a 1x1 Conv, BatchNorm and ReLU. The strides differ per axis (time 1, frequency 2), which
DepthToSpace cannot join; dwdeconv-rewrite rewrites each into two phase Convs interleaved along the frequency axis
(before: kept as "strides differ per axis (1 vs 2)").

Written after df/deepfilternet3.py's ErbDecoder (conv3p, convt3, conv2p, convt2, conv1p, convt1, conv0p, conv0_out
with a Sigmoid) and df/modules.py's Conv2dNormAct and ConvTranspose2dNormAct (a causal ConstantPad2d of k_t - 1 frames
before each (k_t > 1), separable = depthwise + 1x1). Differences, for a small test model: the skip inputs from the
encoder (e0..e3, added in DeepFilterNet3) are left out, the embedding projection is a 3x3 Conv of the input, the
BatchNorm statistics are random, and the input is --frames frames of 8 bands (DeepFilterNet3: 32 ERB bands, 8 after
its encoder's two frequency strides of 2), with --channels channels (DeepFilterNet3's conv_ch: 64).

Usage: python3 examples/export_deepfilternet_erb_decoder.py OUT.onnx [--channels 64] [--frames 100] [--opset 13]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse
import math

import torch
from torch import nn

from export_common import randomise_batchnorm


class Conv2dNormAct(nn.Sequential):
    """df/modules.py's, causal in time; separable is a depthwise Conv then a 1x1."""

    def __init__(self, in_ch, out_ch, kernel_size, fstride=1, separable=False, activation=nn.ReLU):
        kt, kf = kernel_size
        layers = []
        if kt > 1:
            layers.append(nn.ConstantPad2d((0, 0, kt - 1, 0), 0.0))
        groups = math.gcd(in_ch, out_ch) if separable else 1
        layers.append(nn.Conv2d(in_ch, out_ch, kernel_size, padding=(0, kf // 2), stride=(1, fstride), groups=groups,
                                bias=False))
        if groups > 1:
            layers.append(nn.Conv2d(out_ch, out_ch, 1, bias=False))
        layers += [nn.BatchNorm2d(out_ch), activation()]
        super().__init__(*layers)


class ConvTranspose2dNormAct(nn.Sequential):
    """df/modules.py's: padding (k_t - 1, k_f // 2), output_padding (0, k_f // 2), stride (1, fstride)."""

    def __init__(self, in_ch, out_ch, kernel_size, fstride=1, separable=True):
        kt, kf = kernel_size
        layers = []
        if kt > 1:
            layers.append(nn.ConstantPad2d((0, 0, kt - 1, 0), 0.0))
        groups = math.gcd(in_ch, out_ch) if separable else 1
        layers.append(nn.ConvTranspose2d(in_ch, out_ch, kernel_size=kernel_size, padding=(kt - 1, kf // 2),
                                         output_padding=(0, kf // 2), stride=(1, fstride), groups=groups, bias=False))
        if groups > 1:
            layers.append(nn.Conv2d(out_ch, out_ch, 1, bias=False))
        layers += [nn.BatchNorm2d(out_ch), nn.ReLU()]
        super().__init__(*layers)


class ErbDecoder(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = channels
        self.emb = nn.Conv2d(c, c, 3, padding=1)
        self.conv3p = Conv2dNormAct(c, c, (1, 1))
        self.convt3 = Conv2dNormAct(c, c, (1, 3), separable=True)
        self.conv2p = Conv2dNormAct(c, c, (1, 1))
        self.convt2 = ConvTranspose2dNormAct(c, c, (1, 3), fstride=2)
        self.conv1p = Conv2dNormAct(c, c, (1, 1))
        self.convt1 = ConvTranspose2dNormAct(c, c, (1, 3), fstride=2)
        self.conv0p = Conv2dNormAct(c, c, (1, 1))
        self.conv0_out = Conv2dNormAct(c, 1, (1, 3), activation=nn.Sigmoid)

    def forward(self, emb):
        e3 = self.convt3(self.conv3p(self.emb(emb)))
        e2 = self.convt2(self.conv2p(e3))
        e1 = self.convt1(self.conv1p(e2))
        return self.conv0_out(self.conv0p(e1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = ErbDecoder(args.channels)
    model.apply(randomise_batchnorm)
    model.eval()
    x = torch.randn(1, args.channels, args.frames, 8)
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["emb"], output_names=["erb_mask"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
