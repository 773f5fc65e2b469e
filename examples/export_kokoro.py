#!/usr/bin/env python3
"""Exports Kokoro's upsampling decoder block (hexgrad/kokoro, the iSTFTNet decoder it takes from StyleTTS 2) with
seeded random weights, as torch.onnx.export writes it: AdainResBlk1d(1090, 512, style_dim=128, upsample=True).

Kokoro's Decoder ends its decode stack with that block (istftnet.py: 1024 + 2 + 64 = 1090 channels in, 512 out). It
upsamples twice: its residual path runs a depthwise ConvTranspose1d (groups = 1090, kernel 3, stride 2, padding 1,
output_padding 1) as its "pool", and its shortcut a nearest x2 (F.interpolate) then a 1x1 Conv1d, 1090 -> 512
(the tool moves the 1x1 Conv before the Resize: 512 channels repeated instead of 1090).

Written after kokoro/istftnet.py (AdaIN1d, UpSample1d, AdainResBlk1d). Differences, none in what is exported:
weight_norm is left out (the released weights hold plain tensors once it is removed), dropout is 0 (eval).

Usage: python3 examples/export_kokoro.py OUT.onnx [--frames 256] [--opset 17]
  --frames: decoder frames in (256: about 3.4 s of 24 kHz audio after the block's x2 and the generator's x300);
  the inputs are x [1, 1090, frames] and the style s [1, 128].
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
from torch import nn
from torch.nn import functional as F


class AdaIN1d(nn.Module):
    def __init__(self, style_dim, num_features):
        super().__init__()
        self.norm = nn.InstanceNorm1d(num_features, affine=False)
        self.fc = nn.Linear(style_dim, num_features * 2)

    def forward(self, x, s):
        h = self.fc(s)
        h = h.view(h.size(0), h.size(1), 1)
        gamma, beta = torch.chunk(h, chunks=2, dim=1)
        return (1 + gamma) * self.norm(x) + beta


class UpSample1d(nn.Module):
    def __init__(self, layer_type):
        super().__init__()
        self.layer_type = layer_type

    def forward(self, x):
        if self.layer_type == "none":
            return x
        return F.interpolate(x, scale_factor=2, mode="nearest")


class AdainResBlk1d(nn.Module):
    def __init__(self, dim_in, dim_out, style_dim=64, actv=nn.LeakyReLU(0.2), upsample="none", dropout_p=0.0):
        super().__init__()
        self.actv = actv
        self.upsample_type = upsample
        self.upsample = UpSample1d(upsample)
        self.learned_sc = dim_in != dim_out
        self.conv1 = nn.Conv1d(dim_in, dim_out, 3, 1, 1)
        self.conv2 = nn.Conv1d(dim_out, dim_out, 3, 1, 1)
        self.norm1 = AdaIN1d(style_dim, dim_in)
        self.norm2 = AdaIN1d(style_dim, dim_out)
        if self.learned_sc:
            self.conv1x1 = nn.Conv1d(dim_in, dim_out, 1, 1, 0, bias=False)
        self.dropout = nn.Dropout(dropout_p)
        if upsample == "none":
            self.pool = nn.Identity()
        else:
            self.pool = nn.ConvTranspose1d(dim_in, dim_in, kernel_size=3, stride=2, groups=dim_in, padding=1,
                                           output_padding=1)

    def _shortcut(self, x):
        x = self.upsample(x)
        if self.learned_sc:
            x = self.conv1x1(x)
        return x

    def _residual(self, x, s):
        x = self.norm1(x, s)
        x = self.actv(x)
        x = self.pool(x)
        x = self.conv1(self.dropout(x))
        x = self.norm2(x, s)
        x = self.actv(x)
        x = self.conv2(self.dropout(x))
        return x

    def forward(self, x, s):
        out = self._residual(x, s)
        return (out + self._shortcut(x)) * torch.rsqrt(torch.tensor(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--frames", type=int, default=256)
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()
    if args.frames < 1:
        parser.error(f"--frames must be at least 1, got {args.frames}")
    torch.manual_seed(0)
    model = AdainResBlk1d(1090, 512, style_dim=128, upsample=True).eval()
    x, s = torch.randn(1, 1090, args.frames), torch.randn(1, 128)
    with torch.no_grad():
        torch.onnx.export(model, (x, s), args.out, opset_version=args.opset, input_names=["x", "s"], output_names=["y"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
