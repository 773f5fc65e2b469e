#!/usr/bin/env python3
"""Exports DBNet (text detection: a ResNet-18 backbone and SegDetector's FPN fuse and head) with seeded random
weights, as DB's convert_to_onnx.py writes it: input `input`, output `output` (the probability map), opset 12. The
fuse upsamples the four FPN levels by nearest x8, x4 and x2 (nn.Upsample) to 1/4 resolution, concatenates them with
the fourth and runs a 3x3 Conv on the concatenation: in ONNX, three Resizes -> Concat -> Conv, the skip pattern of
FPN decoders. The head then upsamples by two ConvTranspose2d k2 s2 (dense, 64 -> 64 and 64 -> 1). dwdeconv-rewrite
(before the Concat split): the fuse's Resizes kept, "its output is read by Concat".

Written after MhLiao/DB: decoders/seg_detector.py (SegDetector(in_channels=[64, 128, 256, 512], inner_channels=256,
bias=False): in5..in2 1x1 Convs, up5/up4/up3 nearest x2 adds, out5 3x3 Conv + nearest x8, out4 + x4, out3 + x2,
out2, torch.cat((p5, p4, p3, p2), 1), binarize: 3x3 Conv, BN, ReLU, ConvTranspose2d(64, 64, 2, 2), BN, ReLU,
ConvTranspose2d(64, 1, 2, 2), Sigmoid; the eval forward returns `binary` alone, so the adaptive threshold branch is
not in the graph), backbones/resnet.py (resnet18: conv1, bn1, relu, maxpool, layer1..layer4 returned as c2..c5) and
convert_to_onnx.py (torch.onnx.export with input_names ['input'], output_names ['output'], opset 12).

Differences from DB, for a test model: weights are seeded random draws (SegDetector's kaiming_normal_ for the
decoder; BatchNorms random so that their folding is not an identity), not a checkpoint; the backbone is the plain
resnet18 (DB's ic15/td500 configs use deformable_resnet18, whose DeformConv has no ONNX export) written out here;
--width-divisor divides every channel count (1 is DB's); the input is --size (convert_to_onnx.py: 960) and static
unless --dynamic gives convert_to_onnx.py's dynamic batch, height and width; --what decoder exports SegDetector
alone with the four backbone features as inputs (c2..c5 at strides 4 to 32).

Usage: python3 examples/export_dbnet.py OUT.onnx [--size 960] [--width-divisor 1] [--what dbnet|decoder]
                                        [--dynamic] [--opset 12]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import torch
from torch import nn

from export_common import ResNet18, randomise_batchnorm


class SegDetector(nn.Module):
    """seg_detector.py's SegDetector with adaptive=False, smooth=False, serial=False, bias=False, in eval mode."""

    def __init__(self, in_channels, inner_channels):
        super().__init__()
        self.up5 = nn.Upsample(scale_factor=2, mode="nearest")
        self.up4 = nn.Upsample(scale_factor=2, mode="nearest")
        self.up3 = nn.Upsample(scale_factor=2, mode="nearest")
        self.in5 = nn.Conv2d(in_channels[-1], inner_channels, 1, bias=False)
        self.in4 = nn.Conv2d(in_channels[-2], inner_channels, 1, bias=False)
        self.in3 = nn.Conv2d(in_channels[-3], inner_channels, 1, bias=False)
        self.in2 = nn.Conv2d(in_channels[-4], inner_channels, 1, bias=False)
        quarter = inner_channels // 4
        self.out5 = nn.Sequential(nn.Conv2d(inner_channels, quarter, 3, padding=1, bias=False),
                                  nn.Upsample(scale_factor=8, mode="nearest"))
        self.out4 = nn.Sequential(nn.Conv2d(inner_channels, quarter, 3, padding=1, bias=False),
                                  nn.Upsample(scale_factor=4, mode="nearest"))
        self.out3 = nn.Sequential(nn.Conv2d(inner_channels, quarter, 3, padding=1, bias=False),
                                  nn.Upsample(scale_factor=2, mode="nearest"))
        self.out2 = nn.Conv2d(inner_channels, quarter, 3, padding=1, bias=False)
        self.binarize = nn.Sequential(
            nn.Conv2d(inner_channels, quarter, 3, padding=1, bias=False), nn.BatchNorm2d(quarter), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(quarter, quarter, 2, 2), nn.BatchNorm2d(quarter), nn.ReLU(inplace=True),
            nn.ConvTranspose2d(quarter, 1, 2, 2), nn.Sigmoid())
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight.data)  # SegDetector.weights_init
        self.apply(randomise_batchnorm)

    def forward(self, features):
        c2, c3, c4, c5 = features
        in5 = self.in5(c5)
        in4 = self.in4(c4)
        in3 = self.in3(c3)
        in2 = self.in2(c2)

        out4 = self.up5(in5) + in4  # 1/16
        out3 = self.up4(out4) + in3  # 1/8
        out2 = self.up3(out3) + in2  # 1/4

        p5 = self.out5(in5)
        p4 = self.out4(out4)
        p3 = self.out3(out3)
        p2 = self.out2(out2)

        fuse = torch.cat((p5, p4, p3, p2), 1)
        return self.binarize(fuse)


class DBNet(nn.Module):
    """SegDetectorModel's backbone then decoder: resnet18's c2..c5 into SegDetector."""

    def __init__(self, width_divisor):
        super().__init__()
        self.backbone = ResNet18(width_divisor)
        self.decoder = SegDetector(self.backbone.num_ch_enc[1:], 256 // width_divisor)

    def forward(self, x):
        return self.decoder(self.backbone(x)[1:])


class DecoderOnly(nn.Module):
    """SegDetector with its four input features as separate inputs."""

    def __init__(self, network):
        super().__init__()
        self.decoder = network.decoder

    def forward(self, c2, c3, c4, c5):
        return self.decoder([c2, c3, c4, c5])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=960, help="input height and width, a multiple of 32")
    parser.add_argument("--width-divisor", type=int, default=1, choices=[1, 2, 4, 8, 16])
    parser.add_argument("--what", choices=["dbnet", "decoder"], default="dbnet")
    parser.add_argument("--dynamic", action="store_true", help="convert_to_onnx.py's dynamic batch, height, width")
    parser.add_argument("--opset", type=int, default=12)
    args = parser.parse_args()
    if args.size % 32:
        parser.error("--size must be a multiple of 32 (the backbone's stride)")
    torch.manual_seed(0)
    network = DBNet(args.width_divisor).eval()
    image = torch.rand(1, 3, args.size, args.size) * 2 - 1  # convert_to_onnx.py's (img / 255 - 0.5) / 0.5 range
    with torch.no_grad():
        if args.what == "dbnet":
            model, inputs, input_names = network, (image,), ["input"]
            dynamic_axes = {"input": {0: "batch_size", 2: "height", 3: "width"},
                            "output": {0: "batch_size", 2: "height", 3: "width"}}
        else:
            features = network.backbone(image)[1:]
            model, inputs, input_names = DecoderOnly(network).eval(), tuple(features), ["c2", "c3", "c4", "c5"]
            dynamic_axes = {name: {0: "batch_size", 2: "height", 3: "width"} for name in input_names + ["output"]}
        torch.onnx.export(model, inputs, args.out, opset_version=args.opset, input_names=input_names,
                          output_names=["output"], dynamic_axes=dynamic_axes if args.dynamic else None)
    out = args.out[:-5] if args.out.endswith(".onnx") else args.out
    shape = f" --input-shape input:1,3,{args.size},{args.size}" if args.dynamic and args.what == "dbnet" else ""
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {out}.xnn.onnx --target xnnpack --verify{shape}")


if __name__ == "__main__":
    main()
