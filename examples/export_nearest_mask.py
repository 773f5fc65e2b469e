#!/usr/bin/env python3
"""Exports a small generator whose x2 (or x3) upsamplers are written the way MI-GAN's current code writes them:
nearest F.interpolate, a multiply by a constant mask that keeps one sample per s x s cell, F.pad and a depthwise
Conv2d with a learned 4x4 (x3: 5x5) filter. dwdeconv-rewrite recognises this as form `nearest_mask`.

Usage: python3 examples/export_nearest_mask.py OUT.onnx [--opset N] [--factor S] [--channels C] [--size H]
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
import torch.nn.functional as F


class NearestMaskUp(torch.nn.Module):
    """Zero insertion by `up` as nearest upsampling times a mask, then padding and a depthwise k x k filter."""

    def __init__(self, channels, up, k, size):
        super().__init__()
        self.up = up
        # One non-zero per up x up cell, at its top-left, with the gain that keeps the mean (as MI-GAN's code).
        mask = torch.zeros(1, 1, up * size, up * size)
        mask[:, :, ::up, ::up] = float(up * up)
        self.register_buffer("mask", mask)
        self.fir = torch.nn.Conv2d(channels, channels, k, groups=channels, bias=False)
        torch.nn.init.uniform_(self.fir.weight, -1.0, 1.0)
        # Pads that make the output exactly up*H: (k - 1) in total, the larger half first.
        self.pad0 = k // 2
        self.pad1 = k - 1 - self.pad0

    def forward(self, x):
        x = F.interpolate(x, scale_factor=self.up, mode="nearest") * self.mask
        x = F.pad(x, [self.pad0, self.pad1, self.pad0, self.pad1])
        return self.fir(x)


class Generator(torch.nn.Module):
    def __init__(self, channels, up, size):
        super().__init__()
        k = 4 if up == 2 else 5
        self.head = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.up1 = NearestMaskUp(channels, up, k, size)
        self.up2 = NearestMaskUp(channels, up, k, size * up)
        self.tail = torch.nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.head(x))
        x = torch.relu(self.up1(x))
        x = self.up2(x)
        return self.tail(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--factor", type=int, default=2, choices=[2, 3])
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--size", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Generator(args.channels, args.factor, args.size).eval()
    x = torch.randn(1, 3, args.size, args.size)
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["image"], output_names=["rgb"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
