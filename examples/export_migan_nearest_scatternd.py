#!/usr/bin/env python3
"""Exports an MI-GAN-like inpainting generator in its nearest form, with each upsampler's mask built in forward()
from the input's shape: `mask = torch.zeros(1, 1, 2*H, 2*W); mask[:, :, ::2, ::2] = 1`. PyTorch exports that as
a ScatterND on a ConstantOfShape whose shape is computed from Shape(x) (Gather, Mul, Unsqueeze, Concat) and whose
indices come from Range/Expand/Where/Equal chains. dwdeconv-rewrite recognises each upsampler as form
`nearest_mask` (before the tool computed shapes itself, a static model of this kind had 2 of its 12 upsamplers
rewritten). torch.onnx.export
folds what its own shape inference knows, and it loses the shape at the first F.pad (whose pads it writes as a
ConstantOfShape/Concat/Reshape/Slice/Transpose/Reshape/Cast chain): the first synthesis block's two masks come
out mostly folded, every later one starts at Shape(x).

Written after MI-GAN's lib/model_zoo/migan_inference.py (Picsart-AI-Research/MI-GAN, the version whose
Upsample2d is nn.Upsample(scale_factor=2, mode='nearest') times a mask, F.pad (2, 1, 2, 1) and a depthwise 4x4
Conv): an encoder of EncoderBlocks (fromrgb 1x1 at the top resolution, two SeparableConv2d, the second one
downsampling with a depthwise 4x4 stride-2 Conv) and a synthesis path of SynthesisBlocks (SeparableConv2d that
upsamples after its pointwise Conv, the encoder feature added, a second SeparableConv2d, the image path upsampled
and a 1x1 torgb added). Activations are lrelu_agc: LeakyReLU(0.2) * sqrt(2), clamped to [-256, 256]. Per
synthesis resolution there are two upsamplers (the features' and the image's), so resolution R has
2 * (log2(R) - 2): 12 at 256 (the issue's model), 8 at 64, 6 at 32 (the default).

Differences from MI-GAN, for a small test model: channels are min(ch_base / r, ch_max) with smaller defaults
(MI-GAN: 32768 and 512); the weights are seeded random ones, the FIR filters included (MI-GAN's are the binomial
[1,3,3,1] outer product, which is symmetric, so a flipped kernel would pass), and the noise strengths are random
too (MI-GAN's start at 0); the mask is computed rather than a registered buffer (that is the point). --no-noise
drops the per-block noise constants, which are R*R floats each and dominate the file at R = 256.

Usage: python3 examples/export_migan_nearest_scatternd.py OUT.onnx [--resolution 32] [--ch-base 512] [--ch-max 16]
                                                         [--no-noise] [--upsample module|size|recompute]
                                                         [--opset 13]
--upsample size or recompute writes the nearest x2 as F.interpolate with sizes computed from x.shape (Shape,
Gather, Mul or Cast/Mul/Cast/Floor, Unsqueeze, Concat into Resize's sizes), the chain ONNX shape inference cannot evaluate; MI-GAN's
nn.Upsample(scale_factor=2) exports as a Resize by constant scales.
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


def lrelu_agc(x):
    """MI-GAN's activation: LeakyReLU(0.2), gain sqrt(2), clamp 256."""
    x = F.leaky_relu(x, negative_slope=0.2, inplace=True)
    x = x * math.sqrt(2)
    return x.clamp(-256, 256)


class Downsample2d(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.filter = nn.Conv2d(channels, channels, 4, stride=2, padding=1, groups=channels, bias=False)

    def forward(self, x):
        return self.filter(x)


class Upsample2d(nn.Module):
    """Nearest x2, times a mask keeping the top-left sample of each 2x2 cell, pad (2, 1, 2, 1), depthwise 4x4."""

    def __init__(self, channels, upsample="module"):
        super().__init__()
        self.upsample = upsample
        self.nearest_up = nn.Upsample(scale_factor=2, mode="nearest")
        self.filter = nn.Conv2d(channels, channels, 4, groups=channels, bias=False)

    def nearest(self, x):
        if self.upsample == "size":  # sizes computed from x.shape: Resize by sizes
            return F.interpolate(x, size=(2 * x.shape[2], 2 * x.shape[3]), mode="nearest")
        if self.upsample == "recompute":  # the output size computed from the scale, then Resize by sizes
            return F.interpolate(x, scale_factor=2, mode="nearest", recompute_scale_factor=True)
        return self.nearest_up(x)  # MI-GAN's: Resize by constant scales

    def forward(self, x):
        # The mask is built from x's shape, as code without a resolution argument builds it: torch.zeros with
        # sizes read from x.shape (Shape, Gather, Mul, Unsqueeze, Concat, ConstantOfShape), then a strided slice
        # assignment (ScatterND).
        mask = torch.zeros(1, 1, 2 * x.shape[2], 2 * x.shape[3], dtype=x.dtype, device=x.device)
        mask[:, :, ::2, ::2] = 1
        x = self.nearest(x)
        x = x * mask
        x = F.pad(x, pad=(2, 1, 2, 1))
        return self.filter(x)


class SeparableConv2d(nn.Module):
    def __init__(self, cin, cout, resolution=None, use_noise=False, down=1, up=1, upsample="module"):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=True)
        self.conv2 = nn.Conv2d(cin, cout, 1, bias=False)
        self.downsample = Downsample2d(cin) if down > 1 else None
        self.upsample = Upsample2d(cout, upsample) if up > 1 else None
        self.use_noise = use_noise
        if use_noise:
            self.register_buffer("noise_const", torch.randn([resolution, resolution]))
            self.noise_strength = nn.Parameter(torch.randn([]))

    def forward(self, x):
        x = lrelu_agc(self.conv1(x))
        if self.downsample is not None:
            x = self.downsample(x)
        x = self.conv2(x)
        if self.upsample is not None:
            x = self.upsample(x)
        if self.use_noise:
            x = x.add_(self.noise_const * self.noise_strength)
        return lrelu_agc(x)


class EncoderBlock(nn.Module):
    def __init__(self, ic_n, oc_n, rgb_n=None, down=2):
        super().__init__()
        self.fromrgb = nn.Conv2d(rgb_n, ic_n, 1) if rgb_n is not None else None
        self.conv1 = SeparableConv2d(ic_n, ic_n)
        self.conv2 = SeparableConv2d(ic_n, oc_n, down=down)

    def forward(self, x, img):
        if self.fromrgb is not None:
            y = lrelu_agc(self.fromrgb(img))
            x = x + y if x is not None else y
        feat = self.conv1(x)
        return self.conv2(feat), feat


class SynthesisBlockFirst(nn.Module):
    def __init__(self, oc_n, rgb_n):
        super().__init__()
        self.conv1 = SeparableConv2d(oc_n, oc_n)
        self.conv2 = SeparableConv2d(oc_n, oc_n)
        self.torgb = nn.Conv2d(oc_n, rgb_n, 1)

    def forward(self, x, enc_feat):
        x = self.conv2(self.conv1(x) + enc_feat)
        return x, self.torgb(x)


class SynthesisBlock(nn.Module):
    def __init__(self, ic_n, oc_n, resolution, rgb_n, noise, upsample):
        super().__init__()
        self.conv1 = SeparableConv2d(ic_n, oc_n, resolution=resolution, use_noise=noise, up=2, upsample=upsample)
        self.conv2 = SeparableConv2d(oc_n, oc_n, resolution=resolution, use_noise=noise)
        self.torgb = nn.Conv2d(oc_n, rgb_n, 1)
        self.upsample = Upsample2d(rgb_n, upsample)

    def forward(self, x, enc_feat, img):
        x = self.conv2(self.conv1(x) + enc_feat)
        img = self.upsample(img)
        return x, img.add_(self.torgb(x))


class Generator(nn.Module):
    """Input [1, 4, R, R] (RGB and the hole mask), output [1, 3, R, R]."""

    def __init__(self, resolution, ch_base, ch_max, noise, upsample="module"):
        super().__init__()
        log2res = int(math.log2(resolution))
        if 2 ** log2res != resolution or resolution < 8:
            raise ValueError("resolution must be a power of two >= 8")
        ch = lambda r: max(1, min(ch_base // r, ch_max))
        self.encode_res = [2 ** i for i in range(log2res, 1, -1)]
        for idx, (ri, rj) in enumerate(zip(self.encode_res[:-1], self.encode_res[1:])):
            setattr(self, f"enc_b{ri}", EncoderBlock(ch(ri), ch(rj), rgb_n=4 if idx == 0 else None))
        self.enc_b4 = EncoderBlock(ch(4), ch(4), down=1)
        self.block_res = [2 ** i for i in range(2, log2res + 1)]
        self.syn_b4 = SynthesisBlockFirst(ch(4), rgb_n=3)
        for ri, rj in zip(self.block_res[:-1], self.block_res[1:]):
            setattr(self, f"syn_b{rj}", SynthesisBlock(ch(ri), ch(rj), rj, 3, noise, upsample))

    def forward(self, image):
        x, feats = None, {}
        for r in self.encode_res[:-1]:
            x, feats[r] = getattr(self, f"enc_b{r}")(x, image)
        x, feats[4] = self.enc_b4(x, image)
        x, img = self.syn_b4(x, feats[4])
        for r in self.block_res[1:]:
            x, img = getattr(self, f"syn_b{r}")(x, feats[r], img)
        return img


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--resolution", type=int, default=32, help="input and output height and width")
    parser.add_argument("--ch-base", type=int, default=512, help="channels at resolution r: min(ch_base / r, ch_max)")
    parser.add_argument("--ch-max", type=int, default=16)
    parser.add_argument("--no-noise", action="store_true", help="no per-block noise constants")
    parser.add_argument("--upsample", choices=["module", "size", "recompute"], default="module",
                        help="the nearest x2: nn.Upsample(scale_factor=2) as MI-GAN (constant scales), "
                             "F.interpolate with size=(2*H, 2*W), or with recompute_scale_factor=True")
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Generator(args.resolution, args.ch_base, args.ch_max, not args.no_noise, args.upsample).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("filter.weight"):
                nn.init.uniform_(p, -1.0, 1.0)  # FIR filters that are not symmetric
    x = torch.rand(1, 4, args.resolution, args.resolution)
    with torch.no_grad():
        torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["image"],
                          output_names=["rgb"])
    out = args.out[:-5] if args.out.endswith(".onnx") else args.out
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {out}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
