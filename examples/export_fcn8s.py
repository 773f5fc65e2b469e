#!/usr/bin/env python3
"""Exports FCN-8s (wkentaro/pytorch-fcn, semantic segmentation) with seeded random weights, as torch.onnx.export
writes it: its three upsamplers upscore2 and upscore_pool4 (ConvTranspose2d 21 -> 21, kernel 4, stride 2) and upscore8
(kernel 16, stride 8) are dense in the graph (group 1) and depthwise in value: get_upsampling_weight puts a bilinear
filter on the [c, c] diagonal and zeros everywhere else, the way segmentation nets initialise and ship them. Their
outputs are uncropped (2H+2, 8H+8); the network crops afterwards with Slices. dwdeconv-rewrite rewrites each as the
depthwise ConvTranspose it computes (before: kept as dense).

Written after torchfcn/models/fcn8s.py (FCN8s: conv1_1 with padding 100, the VGG16 stages, score_fr, score_pool4,
score_pool3, the three upsamplers and the Slice crops at 5, 9 and 31, as there) and get_upsampling_weight.
Differences, for a small test model: every VGG channel count is divided by --width-divisor (16: 64 -> 4, 512 -> 32)
and fc6/fc7 have 4096 / divisor channels (fc6 keeps its 7x7 kernel); the weights other than the upsamplers are
seeded random draws, not a checkpoint; the input is --size (64 by default; FCN-8s takes any size).

Usage: python3 examples/export_fcn8s.py OUT.onnx [--size 64] [--width-divisor 16] [--opset 13]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch and NumPy (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import numpy as np
import torch
from torch import nn


def get_upsampling_weight(in_channels, out_channels, kernel_size):
    """Make a 2D bilinear kernel suitable for upsampling (pytorch-fcn's)."""
    factor = (kernel_size + 1) // 2
    if kernel_size % 2 == 1:
        center = factor - 1
    else:
        center = factor - 0.5
    og = np.ogrid[:kernel_size, :kernel_size]
    filt = (1 - abs(og[0] - center) / factor) * (1 - abs(og[1] - center) / factor)
    weight = np.zeros((in_channels, out_channels, kernel_size, kernel_size), dtype=np.float64)
    weight[range(in_channels), range(out_channels), :, :] = filt
    return torch.from_numpy(weight).float()


class FCN8s(nn.Module):
    def __init__(self, n_class=21, divisor=16):
        super().__init__()
        w = [max(2, c // divisor) for c in (64, 128, 256, 512, 512, 4096)]

        def stage(cin, cout, n):
            layers = []
            for i in range(n):
                layers += [nn.Conv2d(cin if i == 0 else cout, cout, 3, padding=100 if cin == 3 and i == 0 else 1),
                           nn.ReLU(inplace=True)]
            layers.append(nn.MaxPool2d(2, stride=2, ceil_mode=True))
            return nn.Sequential(*layers)

        self.stage1 = stage(3, w[0], 2)     # 1/2
        self.stage2 = stage(w[0], w[1], 2)  # 1/4
        self.stage3 = stage(w[1], w[2], 3)  # 1/8: pool3
        self.stage4 = stage(w[2], w[3], 3)  # 1/16: pool4
        self.stage5 = stage(w[3], w[4], 3)  # 1/32
        self.fc6 = nn.Conv2d(w[4], w[5], 7)
        self.fc7 = nn.Conv2d(w[5], w[5], 1)
        self.score_fr = nn.Conv2d(w[5], n_class, 1)
        self.score_pool3 = nn.Conv2d(w[2], n_class, 1)
        self.score_pool4 = nn.Conv2d(w[3], n_class, 1)
        self.upscore2 = nn.ConvTranspose2d(n_class, n_class, 4, stride=2, bias=False)
        self.upscore8 = nn.ConvTranspose2d(n_class, n_class, 16, stride=8, bias=False)
        self.upscore_pool4 = nn.ConvTranspose2d(n_class, n_class, 4, stride=2, bias=False)
        for m in (self.upscore2, self.upscore8, self.upscore_pool4):
            m.weight.data.copy_(get_upsampling_weight(m.in_channels, m.out_channels, m.kernel_size[0]))

    def forward(self, x):
        pool3 = self.stage3(self.stage2(self.stage1(x)))
        pool4 = self.stage4(pool3)
        h = torch.relu(self.fc6(self.stage5(pool4)))
        h = torch.relu(self.fc7(h))
        h = self.score_fr(h)
        h = self.upscore2(h)
        upscore2 = h  # 1/16
        h = self.score_pool4(pool4 * 0.01)
        h = h[:, :, 5:5 + upscore2.size()[2], 5:5 + upscore2.size()[3]]
        h = upscore2 + h
        h = self.upscore_pool4(h)
        upscore_pool4 = h  # 1/8
        h = self.score_pool3(pool3 * 0.0001)
        h = h[:, :, 9:9 + upscore_pool4.size()[2], 9:9 + upscore_pool4.size()[3]]
        h = upscore_pool4 + h
        h = self.upscore8(h)
        return h[:, :, 31:31 + x.size()[2], 31:31 + x.size()[3]].contiguous()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--width-divisor", type=int, default=16)
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = FCN8s(divisor=args.width_divisor).eval()
    x = torch.randn(1, 3, args.size, args.size)
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["image"], output_names=["score"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
