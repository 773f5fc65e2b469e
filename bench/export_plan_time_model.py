#!/usr/bin/env python3
"""A StyleGAN3-synthesis-sized model for timing the tool's planning (shape propagation), random weights.

StyleGAN3's synthesis network (4.8 MB, 4,825 nodes) took about 30 s to plan on any target, where an 86 MB StyleGAN2
generator took 2 s: planning time grew with inference rounds x values, not with the model. This export has the same
kind of graph: blocks of upfirdn2d-style resampling whose pads and crops torch computes from x.shape (Shape -> Gather
-> arithmetic -> Concat chains, exported unfolded), modulated convs and a Sigmoid gate per block. 62 blocks give
4,826 nodes. Each block's shapes depend on the previous block's being folded, so planning needs about 125 rounds of
inference.

Usage (an interpreter with torch and onnx: Debian's python3-torch and python3-onnx):
  /usr/bin/python3 bench/export_plan_time_model.py plan62.onnx 62
  /usr/bin/time -v build/cli/dwdeconv-rewrite plan62.onnx --dry-run     # wall, CPU and peak memory of planning
"""
import sys

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, c, up):
        super().__init__()
        self.c, self.up = c, up
        self.w = torch.nn.Parameter(torch.randn(c, c, 3, 3) * 0.1)
        self.f = torch.nn.Parameter(torch.randn(c, 1, 4, 4) * 0.1)
        self.style = torch.nn.Linear(8, c)

    def forward(self, x, z):
        n, c, h, w = x.shape
        s = self.style(z).reshape(n, c, 1, 1)
        x = F.conv2d(x * s, self.w, padding=1)
        if self.up > 1:  # zero insertion, as upfirdn2d writes it
            x = x.reshape(n, c, h, 1, w, 1)
            x = F.pad(x, [0, self.up - 1, 0, 0, 0, self.up - 1])
            x = x.reshape(n, c, h * self.up, w * self.up)
        hh, ww = x.shape[2], x.shape[3]
        x = F.pad(x, [2, 1, 2, 1])
        x = F.conv2d(x, self.f, groups=c)
        x = F.leaky_relu(x, 0.2)
        x = x[:, :, :hh, :ww]
        g = x.mean(dim=[2, 3], keepdim=True)
        return x * torch.sigmoid(g)


class Net(torch.nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(4, 2 if i % 6 == 5 else 1) for i in range(blocks)])

    def forward(self, x, z):
        for b in self.blocks:
            x = b(x, z)
            x = x[:, :, :64, :64] if x.shape[2] > 64 else x
        return x


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    torch.manual_seed(0)
    net = Net(int(sys.argv[2])).eval()
    torch.onnx.export(net, (torch.randn(1, 4, 4, 4), torch.randn(1, 8)), sys.argv[1], opset_version=13, input_names=["x", "z"],
                      output_names=["y"], do_constant_folding=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
