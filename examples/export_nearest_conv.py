#!/usr/bin/env python3
"""Optional: the nearest_conv form as PyTorch exports it, rewritten and checked with ONNX Runtime.

The upsampling block of most U-Nets, VAE decoders and FPNs is nn.Upsample(scale_factor=2, mode='nearest')
followed by a 3x3 Conv2d. torch.onnx.export writes it as Resize (nearest, asymmetric, floor) then Conv, and
dwdeconv-rewrite turns each such pair into 4 phase Convs on the low-resolution input, a Concat and a
DepthToSpace (the ConvTranspose k4 s2 p1 that nearest + 3x3 computes). The tool itself does not need Python.

This script exports two small decoders, one with dense 3x3 Convs and one with depthwise ones, to OUT_DIR. With
the tool found ($DWDECONV_REWRITE, or dwdeconv-rewrite on PATH) it also rewrites each, and with onnxruntime
installed it runs original and rewritten on the same seeded input and prints the max abs difference:

    python3 -m pip install torch onnx onnxruntime        # in a virtualenv of your own
    DWDECONV_REWRITE=build/cli/dwdeconv-rewrite python3 examples/export_nearest_conv.py out/

It exits non-zero when the tool fails, when the rewrite left a Resize, or when the outputs differ by more than
--tolerance.
"""
import argparse
import os
import shutil
import subprocess
import sys

import torch
from torch import nn


class UpBlock(nn.Module):
    """x2 nearest upsampling, then a 3x3 convolution (dense, or depthwise with groups == channels)."""

    def __init__(self, c_in: int, c_out: int, depthwise: bool):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, groups=c_in if depthwise else 1)
        self.act = nn.LeakyReLU(0.2)

    def forward(self, x):
        return self.act(self.conv(self.up(x)))


class Decoder(nn.Module):
    """Two upsampling blocks and a 1x1 projection to RGB: 1x16x16x16 in, 1x3x64x64 out."""

    def __init__(self, depthwise: bool, channels: int = 16):
        super().__init__()
        second = channels if depthwise else channels // 2
        self.body = nn.Sequential(UpBlock(channels, channels, depthwise), UpBlock(channels, second, depthwise))
        self.to_rgb = nn.Conv2d(second, 3, 1)

    def forward(self, latent):
        return torch.tanh(self.to_rgb(self.body(latent)))


def export(model: nn.Module, path: str, opset: int) -> None:
    torch.manual_seed(0)
    model.eval()
    latent = torch.randn(1, 16, 16, 16)
    torch.onnx.export(model, (latent,), path, input_names=["latent"], output_names=["rgb"], opset_version=opset)


def find_tool() -> str:
    return os.environ.get("DWDECONV_REWRITE") or shutil.which("dwdeconv-rewrite") or ""


def compare(original: str, rewritten: str) -> float:
    import numpy as np
    import onnx
    import onnxruntime as ort

    if any(n.op_type == "Resize" for n in onnx.load(rewritten).graph.node):
        raise RuntimeError(f"{rewritten} still has a Resize: the upsamplers were not rewritten")
    latent = np.random.default_rng(7).standard_normal((1, 16, 16, 16)).astype(np.float32)
    outputs = []
    for path in (original, rewritten):
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        outputs.append(session.run(None, {"latent": latent})[0])
    return float(np.max(np.abs(outputs[0] - outputs[1])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="directory for the exported (and rewritten) models")
    parser.add_argument("--opset", type=int, default=13, help="ONNX opset of the export (default 13)")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="max abs difference allowed (default 1e-4)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    tool = find_tool()
    failed = False
    for name, depthwise in (("nearest_conv_dense", False), ("nearest_conv_depthwise", True)):
        original = os.path.join(args.out_dir, name + ".onnx")
        export(Decoder(depthwise), original, args.opset)
        print(f"exported {original}")
        if not tool:
            print("  (set DWDECONV_REWRITE or put dwdeconv-rewrite on PATH to rewrite and compare)")
            continue
        rewritten = os.path.join(args.out_dir, name + ".xnn.onnx")
        run = subprocess.run([tool, original, "-o", rewritten, "--verify"], capture_output=True, text=True)
        print("  " + run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"  exit {run.returncode}")
        if run.returncode != 0:
            print(run.stderr, file=sys.stderr)
            failed = True
            continue
        try:
            diff = compare(original, rewritten)
        except ImportError:
            print("  (install onnxruntime to compare the two models)")
            continue
        except RuntimeError as e:
            print(f"  FAILED: {e}", file=sys.stderr)
            failed = True
            continue
        ok = diff <= args.tolerance
        failed |= not ok
        print(f"  onnxruntime: max abs difference original vs rewritten {diff:.3g} ({'ok' if ok else 'FAILED'})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
