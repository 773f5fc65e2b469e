#!/usr/bin/env python3
"""Exports a small generator whose x2 (or x3) upsamplers are written the way MI-GAN's older code wrote them:
a depthwise ConvTranspose2d that only inserts zeros (kernel = stride, one weight 1 per channel, no bias), then
F.pad and a depthwise Conv2d with a fixed FIR filter. dwdeconv-rewrite recognises this as form `zero_insertion`.

Usage: python3 examples/export_zero_insertion.py OUT.onnx [--opset N] [--factor S] [--channels C] [--size H]
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import torch
import torch.nn.functional as F

from export_common import export_main


class ZeroInsertionUp(torch.nn.Module):
    """Zero insertion by `up` as a one-tap ConvTranspose2d, then padding and a depthwise k x k FIR filter."""

    def __init__(self, channels, up, k):
        super().__init__()
        self.insert = torch.nn.ConvTranspose2d(channels, channels, up, stride=up, groups=channels, bias=False)
        with torch.no_grad():
            self.insert.weight.zero_()
            self.insert.weight[:, :, 0, 0] = float(up * up)  # the gain that keeps the mean, as upfirdn does
        self.insert.weight.requires_grad_(False)
        self.fir = torch.nn.Conv2d(channels, channels, k, groups=channels, bias=False)
        torch.nn.init.uniform_(self.fir.weight, -1.0, 1.0)
        # Pads that make the output exactly up*H: (k - 1) in total, the larger half first.
        self.pad0 = k // 2
        self.pad1 = k - 1 - self.pad0

    def forward(self, x):
        x = self.insert(x)
        x = F.pad(x, [self.pad0, self.pad1, self.pad0, self.pad1])
        return self.fir(x)


if __name__ == "__main__":
    export_main(__doc__, lambda c, s, h, args: ZeroInsertionUp(c, s, 4 if s == 2 else 5))
