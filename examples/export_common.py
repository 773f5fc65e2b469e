"""What the export scripts share: a small generator (head Conv, two upsamplers, tail Conv) and the command line that
seeds it and exports it with torch.onnx.export (export_nearest_mask.py, export_zero_insertion.py, export_upfirdn2d.py),
randomise_batchnorm (export_fastdepth_upconv.py, export_gtcrn_decoder.py, export_deepfilternet_erb_decoder.py), and
a ResNet-18 backbone that returns its stage outputs (export_monodepth2.py, export_dbnet.py). Not a script of its own."""
import argparse

import torch
from torch import nn


def randomise_batchnorm(m):
    """Random BatchNorm statistics and affine parameters, so that the BatchNorms torch.onnx.export folds into the Convs
    are not identities."""
    if isinstance(m, nn.BatchNorm2d):
        m.weight.data.uniform_(0.5, 1.5)
        m.bias.data.uniform_(-0.5, 0.5)
        m.running_mean.uniform_(-0.5, 0.5)
        m.running_var.uniform_(0.5, 1.5)


class BasicBlock(nn.Module):
    """torchvision's (and MhLiao/DB backbones/resnet.py's) ResNet BasicBlock: two 3x3 Conv+BN, a 1x1 strided
    downsample when the shape changes, the residual add, ReLU."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision's resnet18 without its pooling and fully connected head (torchvision is not needed): conv1 7x7
    stride 2, BN, ReLU, max pool, layer1..layer4 of two BasicBlocks each. Channels 64, 64, 128, 256, 512 divided by
    `width_divisor`. forward returns the five feature maps [relu(bn1(conv1)), layer1, layer2, layer3, layer4] at
    strides 2, 4, 8, 16, 32, the list Monodepth2's ResnetEncoder keeps (DB's backbone returns the last four)."""

    def __init__(self, width_divisor=1):
        super().__init__()
        c = [max(1, n // width_divisor) for n in (64, 64, 128, 256, 512)]
        self.num_ch_enc = c
        self.conv1 = nn.Conv2d(3, c[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(c[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(c[0], c[1]), BasicBlock(c[1], c[1]))
        self.layer2 = nn.Sequential(BasicBlock(c[1], c[2], 2), BasicBlock(c[2], c[2]))
        self.layer3 = nn.Sequential(BasicBlock(c[2], c[3], 2), BasicBlock(c[3], c[3]))
        self.layer4 = nn.Sequential(BasicBlock(c[3], c[4], 2), BasicBlock(c[4], c[4]))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        self.apply(randomise_batchnorm)

    def forward(self, x):
        features = [self.relu(self.bn1(self.conv1(x)))]
        features.append(self.layer1(self.maxpool(features[-1])))
        for layer in (self.layer2, self.layer3, self.layer4):
            features.append(layer(features[-1]))
        return features


class Generator(torch.nn.Module):
    """head 3x3 Conv (3 -> C) + ReLU, up1 + ReLU, up2, tail 3x3 Conv (C -> 3)."""

    def __init__(self, channels, up1, up2):
        super().__init__()
        self.head = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.up1 = up1
        self.up2 = up2
        self.tail = torch.nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.head(x))
        x = torch.relu(self.up1(x))
        x = self.up2(x)
        return self.tail(x)


def export_main(doc, make_upsampler, extra_arguments=None):
    """Parses OUT [--opset N] [--factor S] [--channels C] [--size H] (plus `extra_arguments(parser)`), builds a
    Generator whose two upsamplers are make_upsampler(channels, factor, input size, args), seeded, and exports it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--factor", type=int, default=2, choices=[2, 3])
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--size", type=int, default=16)
    if extra_arguments:
        extra_arguments(parser)
    args = parser.parse_args()
    torch.manual_seed(0)
    c, s, h = args.channels, args.factor, args.size
    model = Generator(c, make_upsampler(c, s, h, args), make_upsampler(c, s, h * s, args)).eval()
    x = torch.randn(1, 3, h, h)
    torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["image"], output_names=["rgb"],
                      do_constant_folding=not getattr(args, "no_constant_folding", False))
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")
