"""What the export scripts share: a small generator (head Conv, two upsamplers, tail Conv) and the command line that
seeds it and exports it with torch.onnx.export (export_nearest_mask.py, export_zero_insertion.py, export_upfirdn2d.py),
and randomise_batchnorm (export_fastdepth_upconv.py, export_gtcrn_decoder.py, export_deepfilternet_erb_decoder.py).
Not a script of its own."""
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
