#!/usr/bin/env python3
"""Exports a small generator whose x2 (or x3) upsamplers are written the way StyleGAN2-ADA's reference
`upfirdn2d` writes them: zero insertion by Reshape / Pad / Reshape, padding, a crop that crops nothing, and a
depthwise Conv with a flipped FIR filter repeated over the channels. dwdeconv-rewrite recognises this as form
`reshape_zero_insertion`.

Usage: python3 examples/export_upfirdn2d.py OUT.onnx [--opset N] [--factor S] [--channels C] [--size H]
                                          [--no-constant-folding] [--slice-ends shape|literal]
--slice-ends literal writes the crop's ends as Python ints, the padded size computed from --size, as code that
knows its resolution does (and as torch.onnx.export itself writes them at opset 10, where it knows the Pad's
output shape): the Slices then end at literal Constants, and from opset 11 on, where the pads are PyTorch's
computed chain, ONNX shape inference does not know the dim they end at.
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import torch
import torch.nn.functional as F

from export_common import export_main


def upfirdn2d_up(x, f, up, pad0, pad1, c, crop_ends=None):
    """Upsample x (c channels) by `up` with FIR filter f ([k, k]), padding (pad0, pad1) on both axes, as
    upfirdn2d does. crop_ends: the crop's ends (H, W) as ints, else read from x.shape."""
    n, _, h, w = x.shape
    # Zero insertion: s-1 zeros after every sample, on H and W.
    x = x.reshape([n, c, h, 1, w, 1])
    x = F.pad(x, [0, up - 1, 0, 0, 0, up - 1])
    x = x.reshape([n, c, h * up, w * up])
    # Pad, then a crop by the negative pads (none here, so it crops nothing but is still exported).
    x = F.pad(x, [pad0, pad1, pad0, pad1])
    if crop_ends is None:
        x = x[:, :, 0:x.shape[2], 0:x.shape[3]]
    else:
        x = x[:, :, 0:crop_ends[0], 0:crop_ends[1]]
    # The filter, flipped and repeated over the channels: a depthwise Conv.
    f = f * (up * up)
    f = f.flip([0, 1])
    f = f[None, None].repeat([c, 1, 1, 1])
    return F.conv2d(x, f, groups=c)


class UpFirDn2dUp(torch.nn.Module):
    """upfirdn2d_up with a fixed non-separable FIR filter: 4x4 for x2, 5x5 for x3."""

    def __init__(self, channels, up, size, literal_ends=False):
        super().__init__()
        self.up = up
        self.channels = channels
        taps = torch.tensor([1.0, 3.0, 3.0, 1.0]) if up == 2 else torch.tensor([1.0, 2.0, 3.0, 2.0, 1.0])
        k = taps.numel()
        # A non-separable filter, so a flipped or transposed kernel cannot pass by symmetry.
        f = torch.outer(taps, taps) + 0.25 * torch.arange(k * k, dtype=torch.float32).reshape(k, k)
        self.register_buffer("fir", f / f.sum())
        # Pads that make the output exactly up*H: (k - 1) in total, the larger half first.
        self.pad0 = k // 2
        self.pad1 = k - 1 - self.pad0
        # The padded size, where the crop of nothing ends (as ints, or None to read it from x.shape).
        padded = size * up + self.pad0 + self.pad1
        self.crop_ends = (padded, padded) if literal_ends else None

    def forward(self, x):
        return upfirdn2d_up(x, self.fir, self.up, self.pad0, self.pad1, self.channels, self.crop_ends)


def upfirdn2d_arguments(parser):
    parser.add_argument("--no-constant-folding", action="store_true",
                        help="keep the filter's Slice/Unsqueeze/Expand/Tile chain in the graph")
    parser.add_argument("--slice-ends", choices=["shape", "literal"], default="shape",
                        help="the crop's ends: read from x.shape (Shape, Gather, Unsqueeze) or literal ints")


if __name__ == "__main__":
    export_main(__doc__, lambda c, s, h, args: UpFirDn2dUp(c, s, h, args.slice_ends == "literal"), upfirdn2d_arguments)
