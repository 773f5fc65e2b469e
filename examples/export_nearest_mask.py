#!/usr/bin/env python3
"""Exports a small generator whose x2 (or x3) upsamplers are written the way MI-GAN's current code writes them:
nearest F.interpolate, a multiply by a constant mask that keeps one sample per s x s cell, F.pad and a depthwise
Conv2d with a learned 4x4 (x3: 5x5) filter. dwdeconv-rewrite recognises this as form `nearest_mask`.

Usage: python3 examples/export_nearest_mask.py OUT.onnx [--opset N] [--factor S] [--channels C] [--size H]
                                              [--mask buffer|computed]
--mask computed builds the mask in forward() by slice assignment (`mask[:, :, ::s, ::s] = gain`), which PyTorch
exports as a ScatterND on zeros with its indices computed by Where/Equal/Expand chains; the tool folds it.
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import torch
import torch.nn.functional as F

from export_common import export_main


class NearestMaskUp(torch.nn.Module):
    """Zero insertion by `up` as nearest upsampling times a mask, then padding and a depthwise k x k filter."""

    def __init__(self, channels, up, k, size, computed_mask=False):
        super().__init__()
        self.up = up
        self.size = size
        self.computed_mask = computed_mask
        self.register_buffer("mask", self.make_mask())
        self.fir = torch.nn.Conv2d(channels, channels, k, groups=channels, bias=False)
        torch.nn.init.uniform_(self.fir.weight, -1.0, 1.0)
        # Pads that make the output exactly up*H: (k - 1) in total, the larger half first.
        self.pad0 = k // 2
        self.pad1 = k - 1 - self.pad0

    def make_mask(self):
        # One non-zero per up x up cell, at its top-left, with the gain that keeps the mean (as MI-GAN's code).
        mask = torch.zeros(1, 1, self.up * self.size, self.up * self.size)
        mask[:, :, ::self.up, ::self.up] = float(self.up * self.up)
        return mask

    def forward(self, x):
        mask = self.make_mask() if self.computed_mask else self.mask
        x = F.interpolate(x, scale_factor=self.up, mode="nearest") * mask
        x = F.pad(x, [self.pad0, self.pad1, self.pad0, self.pad1])
        return self.fir(x)


def mask_argument(parser):
    parser.add_argument("--mask", choices=["buffer", "computed"], default="buffer")


if __name__ == "__main__":
    export_main(__doc__, lambda c, s, h, args: NearestMaskUp(c, s, 4 if s == 2 else 5, h, args.mask == "computed"),
                mask_argument)
