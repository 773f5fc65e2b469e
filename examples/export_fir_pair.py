#!/usr/bin/env python3
"""Exports a small generator whose upsamplers are written the way StyleGAN3's reference path writes them
(NVlabs/stylegan3, torch_utils/ops/upfirdn2d.py `_upfirdn2d_ref` with a separable 1-D filter, as
`filtered_lrelu` with impl='ref' calls it): zero insertion by Reshape / Pad / Reshape, a Pad by the positive
pads, a Slice by the negative ones, then a depthwise 1xK Conv and a depthwise Kx1 Conv. dwdeconv-rewrite
recognises the pair as form `fir_pair`.

Usage: python3 examples/export_fir_pair.py OUT.onnx [--opset N] [--factor S] [--channels C] [--size H]
                                          [--pads P0 P1] [--taps K]
The defaults are a StyleGAN3 x2 layer's: K = 6 * up, pads 9 and 8 (the x4 layers': K 24, pads -6 and -9).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
import torch.nn.functional as F


def upfirdn2d_ref_up(x, f, up, padding, gain):
    """upfirdn2d's reference path for up > 1, down 1, a 1-D filter f, flip_filter False: padding is
    [padx0, padx1, pady0, pady1] and may be negative (a crop)."""
    batch_size, num_channels, in_height, in_width = x.shape
    padx0, padx1, pady0, pady1 = padding
    # Upsample by inserting zeros.
    x = x.reshape([batch_size, num_channels, in_height, 1, in_width, 1])
    x = F.pad(x, [0, up - 1, 0, 0, 0, up - 1])
    x = x.reshape([batch_size, num_channels, in_height * up, in_width * up])
    # Pad or crop.
    x = F.pad(x, [max(padx0, 0), max(padx1, 0), max(pady0, 0), max(pady1, 0)])
    x = x[:, :, max(-pady0, 0):x.shape[2] - max(-pady1, 0), max(-padx0, 0):x.shape[3] - max(-padx1, 0)]
    # Setup filter: the gain split over the two 1-D passes, flipped.
    f = f * (gain ** (f.ndim / 2))
    f = f.to(x.dtype)
    f = f.flip(list(range(f.ndim)))
    # Convolve with the filter, separably.
    f = f[None, None].repeat([num_channels, 1] + [1] * f.ndim)
    x = F.conv2d(input=x, weight=f.unsqueeze(2), groups=num_channels)
    x = F.conv2d(input=x, weight=f.unsqueeze(3), groups=num_channels)
    return x


class FirPairUp(torch.nn.Module):
    """upfirdn2d_ref_up with a fixed asymmetric 1-D filter of K taps (so a flip cannot pass by symmetry)."""

    def __init__(self, up, taps, padding):
        super().__init__()
        self.up = up
        self.padding = padding
        f = torch.rand(taps) + 0.1 * torch.arange(taps, dtype=torch.float32)
        self.register_buffer("fir", f / f.sum())

    def forward(self, x):
        return upfirdn2d_ref_up(x, self.fir, self.up, self.padding, gain=self.up ** 2)


class Generator(torch.nn.Module):
    """head 3x3 Conv (3 -> C) + ReLU, the upsampler, LeakyReLU, tail 3x3 Conv (C -> 3)."""

    def __init__(self, channels, up):
        super().__init__()
        self.head = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.up = up
        self.tail = torch.nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.head(x))
        x = F.leaky_relu(self.up(x), 0.2)
        return self.tail(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--factor", type=int, default=2, choices=[2, 4])
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--taps", type=int, default=0, help="K (default 6 * factor, as StyleGAN3's up filters)")
    parser.add_argument("--pads", type=int, nargs=2, default=None, help="pad (or crop, < 0) before and after")
    args = parser.parse_args()
    torch.manual_seed(0)
    taps = args.taps or 6 * args.factor
    pads = args.pads or ([9, 8] if args.factor == 2 else [-6, -9])
    up = FirPairUp(args.factor, taps, [pads[0], pads[1], pads[0], pads[1]])
    model = Generator(args.channels, up).eval()
    x = torch.randn(1, 3, args.size, args.size)
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["image"], output_names=["rgb"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
