#!/usr/bin/env python3
"""Exports Monodepth2's depth network (ResNet-18 encoder and DepthDecoder) with seeded random weights, as
torch.onnx.export writes it. Each of the decoder's five stages is ConvBlock (reflection Pad 1, 3x3 Conv, ELU), a
nearest x2 F.interpolate, torch.cat with the encoder's skip feature, and the next ConvBlock: in ONNX, Resize ->
Concat -> Pad(reflect) -> Conv, the U-Net skip pattern. The last stage has no skip, so its torch.cat([x], 1) is a
one-input Concat. dwdeconv-rewrite (before the Concat split): 0 of 5 stages rewritten, "its output is read by Concat".

Written after nianticlabs/monodepth2: networks/depth_decoder.py (DepthDecoder: num_ch_dec 16, 32, 64, 128, 256,
upconv_0 and upconv_1 per stage, use_skips, dispconv per scale and Sigmoid, the same order), layers.py (ConvBlock,
Conv3x3 with nn.ReflectionPad2d(1), upsample = F.interpolate(scale_factor=2, mode="nearest")) and
networks/resnet_encoder.py (ResnetEncoder(18): (x - 0.45) / 0.225, conv1, bn1, relu, maxpool, layer1..layer4,
num_ch_enc 64, 64, 128, 256, 512).

Differences from Monodepth2, for a test model: weights are seeded random draws (not a KITTI checkpoint, and the
BatchNorms random so that their folding is not an identity); the ResNet-18 is written out here (no torchvision);
--width-divisor divides every encoder and decoder channel count (1 is Monodepth2's); the outputs are the disparity at
scale 0 (what test_simple.py reads), or with --all-scales the four disparities the decoder computes. --what decoder
exports the DepthDecoder alone with the five encoder features as inputs (f0..f4, at strides 2 to 32).

Usage: python3 examples/export_monodepth2.py OUT.onnx [--height 192] [--width 640] [--width-divisor 1]
                                            [--what depth|decoder] [--all-scales] [--opset 11]
The input is 192x640 by default (Monodepth2's KITTI size; height and width multiples of 32). Opset 11 by default, as
Monodepth2 users export it; --opset 13 or 17 as well. The same command writes the same bytes on every run.
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
import torch.nn.functional as F
from torch import nn

from export_common import ResNet18


class Conv3x3(nn.Module):
    """layers.py's Conv3x3(use_refl=True): reflection Pad 1, then a 3x3 Conv."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.pad = nn.ReflectionPad2d(1)
        self.conv = nn.Conv2d(int(in_channels), int(out_channels), 3)

    def forward(self, x):
        return self.conv(self.pad(x))


class ConvBlock(nn.Module):
    """layers.py's ConvBlock: Conv3x3 and ELU."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = Conv3x3(in_channels, out_channels)
        self.nonlin = nn.ELU(inplace=True)

    def forward(self, x):
        return self.nonlin(self.conv(x))


def upsample(x):
    """layers.py's upsample: nearest x2."""
    return F.interpolate(x, scale_factor=2, mode="nearest")


class DepthDecoder(nn.Module):
    """depth_decoder.py's DepthDecoder(num_ch_enc, scales=range(4)), use_skips=True, one output channel; forward
    returns the disparities of `out_scales` (depth_decoder.py keeps them in self.outputs[("disp", s)])."""

    def __init__(self, num_ch_enc, num_ch_dec, out_scales):
        super().__init__()
        self.num_ch_enc = num_ch_enc
        self.num_ch_dec = num_ch_dec
        self.out_scales = out_scales
        self.convs = nn.ModuleDict()
        for i in range(4, -1, -1):
            num_ch_in = num_ch_enc[-1] if i == 4 else num_ch_dec[i + 1]
            self.convs[f"upconv_{i}_0"] = ConvBlock(num_ch_in, num_ch_dec[i])
            num_ch_in = num_ch_dec[i] + (num_ch_enc[i - 1] if i > 0 else 0)
            self.convs[f"upconv_{i}_1"] = ConvBlock(num_ch_in, num_ch_dec[i])
        for s in range(4):
            self.convs[f"dispconv_{s}"] = Conv3x3(num_ch_dec[s], 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, input_features):
        outputs = {}
        x = input_features[-1]
        for i in range(4, -1, -1):
            x = self.convs[f"upconv_{i}_0"](x)
            x = [upsample(x)]
            if i > 0:
                x += [input_features[i - 1]]
            x = torch.cat(x, 1)  # one input at i == 0: a one-input Concat in ONNX
            x = self.convs[f"upconv_{i}_1"](x)
            if i < 4:
                outputs[i] = self.sigmoid(self.convs[f"dispconv_{i}"](x))
        return tuple(outputs[s] for s in self.out_scales)


class DepthNetwork(nn.Module):
    """ResnetEncoder(18) then DepthDecoder, on one image (Monodepth2's test_simple.py path)."""

    def __init__(self, width_divisor, out_scales):
        super().__init__()
        self.encoder = ResNet18(width_divisor)
        num_ch_dec = [max(1, n // width_divisor) for n in (16, 32, 64, 128, 256)]
        self.decoder = DepthDecoder(self.encoder.num_ch_enc, num_ch_dec, out_scales)

    def forward(self, image):
        return self.decoder(self.encoder((image - 0.45) / 0.225))


class DecoderOnly(nn.Module):
    """The DepthDecoder with its five input features as separate inputs."""

    def __init__(self, network):
        super().__init__()
        self.decoder = network.decoder

    def forward(self, f0, f1, f2, f3, f4):
        return self.decoder([f0, f1, f2, f3, f4])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--height", type=int, default=192)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--width-divisor", type=int, default=1, choices=[1, 2, 4, 8, 16])
    parser.add_argument("--what", choices=["depth", "decoder"], default="depth")
    parser.add_argument("--all-scales", action="store_true", help="output the four disparities, not scale 0 only")
    parser.add_argument("--opset", type=int, default=11)
    args = parser.parse_args()
    if args.height % 32 or args.width % 32:
        parser.error("--height and --width must be multiples of 32 (the encoder's stride)")
    torch.manual_seed(0)
    out_scales = (0, 1, 2, 3) if args.all_scales else (0,)
    network = DepthNetwork(args.width_divisor, out_scales).eval()
    image = torch.rand(1, 3, args.height, args.width)
    output_names = [f"disp{s}" for s in out_scales]
    with torch.no_grad():
        if args.what == "depth":
            model, inputs, input_names = network, (image,), ["image"]
        else:
            features = network.encoder((image - 0.45) / 0.225)
            model, inputs, input_names = DecoderOnly(network).eval(), tuple(features), [f"f{i}" for i in range(5)]
        torch.onnx.export(model, inputs, args.out, opset_version=args.opset, input_names=input_names,
                          output_names=output_names)
    out = args.out[:-5] if args.out.endswith(".onnx") else args.out
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {out}.xnn.onnx --target xnnpack --verify")


if __name__ == "__main__":
    main()
