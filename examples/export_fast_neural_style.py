#!/usr/bin/env python3
"""Exports pytorch/examples' fast_neural_style TransformerNet (random weights; the architecture as in
fast_neural_style/neural_style/transformer_net.py): its two upsampling layers are UpsampleConvLayer, a nearest
x2 F.interpolate, a ReflectionPad2d(k // 2) and a stride-1 3x3 Conv. dwdeconv-rewrite recognises each as form
`nearest_conv` on an edge-padded x (reflecting a x2 nearest upsampling by 1 repeats x's edge samples).

Usage: python3 examples/export_fast_neural_style.py OUT.onnx [--opset N] [--size H] [--channels-div D]
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.reflection_pad = torch.nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class ResidualBlock(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        out = self.relu(self.in1(self.conv1(x)))
        return self.in2(self.conv2(out)) + x


class UpsampleConvLayer(torch.nn.Module):
    """nearest F.interpolate by `upsample`, ReflectionPad2d(k // 2), stride-1 Conv2d: pytorch/examples' own layer."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super().__init__()
        self.upsample = upsample
        self.reflection_pad = torch.nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = torch.nn.functional.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
        return self.conv2d(self.reflection_pad(x_in))


class TransformerNet(torch.nn.Module):
    def __init__(self, div=1):
        super().__init__()
        c1, c2, c3 = 32 // div, 64 // div, 128 // div
        self.conv1 = ConvLayer(3, c1, kernel_size=9, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(c1, affine=True)
        self.conv2 = ConvLayer(c1, c2, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(c2, affine=True)
        self.conv3 = ConvLayer(c2, c3, kernel_size=3, stride=2)
        self.in3 = torch.nn.InstanceNorm2d(c3, affine=True)
        self.res = torch.nn.Sequential(*[ResidualBlock(c3) for _ in range(5)])
        self.deconv1 = UpsampleConvLayer(c3, c2, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(c2, affine=True)
        self.deconv2 = UpsampleConvLayer(c2, c1, kernel_size=3, stride=1, upsample=2)
        self.in5 = torch.nn.InstanceNorm2d(c1, affine=True)
        self.deconv3 = ConvLayer(c1, 3, kernel_size=9, stride=1)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        y = self.relu(self.in1(self.conv1(x)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res(y)
        y = self.relu(self.in4(self.deconv1(y)))
        y = self.relu(self.in5(self.deconv2(y)))
        return self.deconv3(y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--channels-div", type=int, default=1, help="divide every channel count (a smaller model)")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TransformerNet(args.channels_div).eval()
    # Affine InstanceNorm starts as the identity; random gains and shifts make it a real layer.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.InstanceNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    x = torch.rand(1, 3, args.size, args.size) * 255.0
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["image"], output_names=["stylized"])
    out = args.out[:-5] if args.out.endswith(".onnx") else args.out
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {out}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
