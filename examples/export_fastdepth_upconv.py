#!/usr/bin/env python3
"""Exports FastDepth's MobileNet encoder with its UpConv decoder, with seeded random weights, as torch.onnx.export
writes it: each of the decoder's five x2 upsamplers is FastDepth's Unpool, a depthwise ConvTranspose k2 s2 whose
weight [[1, 0], [0, 0]] per channel is expanded to the input's channel count (x.size(1)) in forward(), so the
weight is an Expand node's output, not an initializer; then a dense 5x5 Conv, BatchNorm and ReLU. dwdeconv-rewrite
sees each Unpool as a depthwise ConvTranspose (before the tool folded computed weights: 0 of 5 rewritten, "weight not constant").

Written after dwofk/fast-depth's models.py (Unpool, upconv, UpConv, weights_init, MobileNet(decoder='upconv'))
and imagenet/mobilenet.py (conv_bn, conv_dw with ReLU6, layers 0 to 13, without the average pool and the fully
connected layer). The Unpool below is FastDepth's, line for line; its mask is a plain tensor attribute, as there,
so the exporter stores it as a constant. With a static input PyTorch 1.13 writes the expanded shape as the literal
[C, 1, -1, -1] and the -1s as ConstantOfShape/Mul/Equal/Where, so the weight is Expand(mask, Where(...)): a chain
of literals only, at every opset from 9 to 17.

Differences from FastDepth, for a small test model: every channel count is divided by --width-divisor and is at
least 2 (FastDepth: 1024 channels into the decoder; the default 32 gives 32, then 16, 8, 4, 2 and 2 after each
upsampler, so that no stage is a single channel), the input is --size (FastDepth: 224; the encoder's stride is 32,
so 64 gives a 2x2 decoder input and a 64x64 depth map), the weights are weights_init's normal draws (not an
ImageNet checkpoint), and the BatchNorm statistics and affine parameters are random rather than weights_init's
0 and 1, so that the BatchNorms torch.onnx.export folds into the Convs are not identities.

Usage: python3 examples/export_fastdepth_upconv.py OUT.onnx [--size 64] [--width-divisor 32] [--opset 13]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

from export_common import randomise_batchnorm


class Unpool(nn.Module):
    # Unpool: 2*2 unpooling with zero padding (FastDepth's, unchanged)
    def __init__(self, stride=2):
        super(Unpool, self).__init__()

        self.stride = stride

        # create kernel [1, 0; 0, 0]
        self.mask = torch.zeros(1, 1, stride, stride)
        self.mask[:, :, 0, 0] = 1

    def forward(self, x):
        assert x.dim() == 4
        num_channels = x.size(1)
        return F.conv_transpose2d(x,
            self.mask.detach().type_as(x).expand(num_channels, 1, -1, -1),
            stride=self.stride, groups=num_channels)


def weights_init(m):
    # FastDepth's, for the Convs: Gaussian kernel weights (BatchNorm: see randomise_batchnorm).
    if isinstance(m, nn.Conv2d):
        n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
        m.weight.data.normal_(0, math.sqrt(2. / n))
        if m.bias is not None:
            m.bias.data.zero_()


def upconv(in_channels, out_channels):
    return nn.Sequential(
        Unpool(2),
        nn.Conv2d(in_channels, out_channels, kernel_size=5, stride=1, padding=2, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
    )


def pointwise(in_channels, out_channels):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 1, 1, 0, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class UpConv(nn.Module):
    """FastDepth's UpConv with channels 1024, 512, ..., 32 given as c[0..5]."""

    def __init__(self, c):
        super(UpConv, self).__init__()
        self.upconv1 = upconv(c[0], c[1])
        self.upconv2 = upconv(c[1], c[2])
        self.upconv3 = upconv(c[2], c[3])
        self.upconv4 = upconv(c[3], c[4])
        self.upconv5 = upconv(c[4], c[5])
        self.convf = pointwise(c[5], 1)

    def forward(self, x):
        x = self.upconv1(x)
        x = self.upconv2(x)
        x = self.upconv3(x)
        x = self.upconv4(x)
        x = self.upconv5(x)
        x = self.convf(x)
        return x


def mobilenet_layers(c):
    """imagenet/mobilenet.py's MobileNet(relu6=True).model[0:14], channel count n given as c(n)."""

    def conv_bn(inp, oup, stride):
        return nn.Sequential(nn.Conv2d(inp, oup, 3, stride, 1, bias=False), nn.BatchNorm2d(oup), nn.ReLU6(inplace=True))

    def conv_dw(inp, oup, stride):
        return nn.Sequential(
            nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False), nn.BatchNorm2d(inp), nn.ReLU6(inplace=True),
            nn.Conv2d(inp, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup), nn.ReLU6(inplace=True))

    return [conv_bn(3, c(32), 2), conv_dw(c(32), c(64), 1), conv_dw(c(64), c(128), 2), conv_dw(c(128), c(128), 1),
            conv_dw(c(128), c(256), 2), conv_dw(c(256), c(256), 1), conv_dw(c(256), c(512), 2)] + \
           [conv_dw(c(512), c(512), 1) for _ in range(5)] + [conv_dw(c(512), c(1024), 2), conv_dw(c(1024), c(1024), 1)]


class MobileNetUpConv(nn.Module):
    """models.py's MobileNet(decoder='upconv', in_channels=3): mobilenet.model[0:14], then UpConv."""

    def __init__(self, d):
        super().__init__()
        c = lambda n: max(2, n // d)  # FastDepth's n channels, divided by d, at least 2
        self.mobilenet = nn.Sequential(*mobilenet_layers(c))
        self.decoder = UpConv([c(n) for n in (1024, 512, 256, 128, 64, 32)])
        self.apply(weights_init)
        self.apply(randomise_batchnorm)

    def forward(self, x):
        x = self.mobilenet(x)
        x = self.decoder(x)
        return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=64, help="input height and width, a multiple of 32")
    parser.add_argument("--width-divisor", type=int, default=32, choices=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    if args.size % 32 != 0:
        parser.error("--size must be a multiple of 32 (the encoder's stride)")
    torch.manual_seed(0)
    model = MobileNetUpConv(args.width_divisor).eval()
    x = torch.rand(1, 3, args.size, args.size)
    with torch.no_grad():
        torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["rgb"],
                          output_names=["depth"])
    out = args.out[:-5] if args.out.endswith(".onnx") else args.out
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {out}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
