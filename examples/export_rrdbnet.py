#!/usr/bin/env python3
"""Exports ESRGAN's generator, BasicSR's RRDBNet at x4, with random weights: a real super-resolution network
whose two upsamplers are a nearest x2 F.interpolate followed by a dense 3x3 Conv (form `nearest_conv`).

Written after BasicSR's basicsr/archs/rrdbnet_arch.py (XPixelGroup/BasicSR), the x4 case only: conv_first (3x3,
3 -> num_feat); num_block RRDB blocks, each three ResidualDenseBlocks of five 3x3 Convs (dense connections,
num_grow_ch channels each, LeakyReLU(0.2) after the first four, the fifth back to num_feat and scaled by 0.2
into the residual) with the RRDB's own 0.2-scaled residual; conv_body (3x3) added to conv_first's output; then
twice F.interpolate(scale_factor=2, mode='nearest') + 3x3 Conv + LeakyReLU(0.2) (conv_up1, conv_up2); conv_hr +
LeakyReLU; conv_last (num_feat -> 3).

The weights are seeded random ones, not a trained checkpoint: PyTorch's default initialisation, with the dense
blocks' Conv weights scaled by 0.1 as BasicSR's default_init_weights does. Their biases stay random where BasicSR
zeroes them, because torch.onnx.export stores identical initializers once and reads the copies through Identity
nodes. So the graph and its costs are ESRGAN's, the pixels are not. ESRGAN itself is num_feat 64, num_block 23,
num_grow_ch 32; the defaults here are smaller, so that onnx2tf and ExecuTorch convert it quickly.

Usage: python3 examples/export_rrdbnet.py OUT.onnx [--num-feat 32] [--num-block 2] [--num-grow-ch 32]
                                        [--size 64] [--opset 17]
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
import torch.nn.functional as F
from torch import nn


def conv3x3(cin, cout):
    return nn.Conv2d(cin, cout, 3, 1, 1)


class ResidualDenseBlock(nn.Module):
    """Five 3x3 Convs; Conv i reads x and every earlier Conv's output (channel Concat)."""

    def __init__(self, num_feat, num_grow_ch):
        super().__init__()
        self.convs = nn.ModuleList(conv3x3(num_feat + i * num_grow_ch, num_grow_ch if i < 4 else num_feat)
                                   for i in range(5))
        for conv in self.convs:
            with torch.no_grad():
                conv.weight.mul_(0.1)

    def forward(self, x):
        features = [x]
        for i, conv in enumerate(self.convs):
            y = conv(torch.cat(features, 1) if len(features) > 1 else x)
            if i < 4:
                features.append(F.leaky_relu(y, 0.2))
        return y * 0.2 + x


class RRDB(nn.Module):
    def __init__(self, num_feat, num_grow_ch):
        super().__init__()
        self.rdb1 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb2 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb3 = ResidualDenseBlock(num_feat, num_grow_ch)

    def forward(self, x):
        return self.rdb3(self.rdb2(self.rdb1(x))) * 0.2 + x


class RRDBNet(nn.Module):
    """x4: conv_first, body (num_block RRDBs), conv_body, two nearest x2 + 3x3 Conv upsamplers, conv_hr, conv_last."""

    def __init__(self, num_feat=64, num_block=23, num_grow_ch=32, num_in_ch=3, num_out_ch=3):
        super().__init__()
        self.conv_first = conv3x3(num_in_ch, num_feat)
        self.body = nn.Sequential(*[RRDB(num_feat, num_grow_ch) for _ in range(num_block)])
        self.conv_body = conv3x3(num_feat, num_feat)
        self.conv_up1 = conv3x3(num_feat, num_feat)
        self.conv_up2 = conv3x3(num_feat, num_feat)
        self.conv_hr = conv3x3(num_feat, num_feat)
        self.conv_last = conv3x3(num_feat, num_out_ch)

    def forward(self, x):
        feat = self.conv_first(x)
        feat = feat + self.conv_body(self.body(feat))
        feat = F.leaky_relu(self.conv_up1(F.interpolate(feat, scale_factor=2, mode="nearest")), 0.2)
        feat = F.leaky_relu(self.conv_up2(F.interpolate(feat, scale_factor=2, mode="nearest")), 0.2)
        return self.conv_last(F.leaky_relu(self.conv_hr(feat), 0.2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--num-feat", type=int, default=32)
    parser.add_argument("--num-block", type=int, default=2)
    parser.add_argument("--num-grow-ch", type=int, default=32)
    parser.add_argument("--size", type=int, default=64, help="input height and width (the output is 4x that)")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = RRDBNet(args.num_feat, args.num_block, args.num_grow_ch).eval()
    x = torch.rand(1, 3, args.size, args.size)
    with torch.no_grad():
        torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["lr"], output_names=["sr"])
    out = args.out[:-5] if args.out.endswith(".onnx") else args.out
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {out}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
