#!/usr/bin/env python3
"""Exports the decoder of an audio codec with seeded random weights, as torch.onnx.export writes it, to list the ops
it exports to and check that the tool's executor runs them (`--verify`): DAC (descriptinc/descript-audio-codec) or
SNAC (hubertsiuzdak/snac).

Both decoders are stacks of DecoderBlock: Snake1d (x + 1/(alpha + 1e-9) * sin(alpha * x)^2: Reciprocal, Sin, Pow), a
dense ConvTranspose1d (C -> C/2, kernel 2s, stride s: dense, which the tool keeps), and three ResidualUnits (Snake1d,
a dilated Conv1d k 7, Snake1d, a 1x1 Conv1d); then Snake1d, a Conv1d to one channel and Tanh. SNAC's adds a NoiseBlock
after each ConvTranspose1d (x + randn * Conv1x1(x)) and, with --depthwise, depthwise dilated Conv1ds.

Written after dac/model/dac.py and dac/nn/layers.py (DAC) and snac/layers.py (SNAC). Differences, none in what is
exported: weight_norm is left out (plain weights, as after remove_weight_norm); the Snake alphas are random, so that
no activation is an identity; SNAC's LocalMHA (attn_window_size) is left out (its 24 kHz model has none).

Usage: python3 examples/export_audio_codec.py OUT.onnx [--model dac|snac] [--frames 16] [--channels 64]
                                                [--rates 4 2] [--latent 32] [--depthwise] [--noise] [--opset 17]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse
import math

import torch
from torch import nn


def snake(x, alpha):
    shape = x.shape
    x = x.reshape(shape[0], shape[1], -1)
    x = x + (alpha + 1e-9).reciprocal() * torch.sin(alpha * x).pow(2)
    return x.reshape(shape)


class Snake1d(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.alpha = nn.Parameter(torch.empty(1, channels, 1).uniform_(0.5, 1.5))

    def forward(self, x):
        return snake(x, self.alpha)


class ResidualUnit(nn.Module):
    def __init__(self, dim, dilation=1, kernel=7, groups=1):
        super().__init__()
        pad = ((kernel - 1) * dilation) // 2
        self.block = nn.Sequential(Snake1d(dim), nn.Conv1d(dim, dim, kernel, dilation=dilation, padding=pad, groups=groups),
                                   Snake1d(dim), nn.Conv1d(dim, dim, 1))

    def forward(self, x):
        y = self.block(x)
        pad = (x.shape[-1] - y.shape[-1]) // 2
        if pad > 0:
            x = x[..., pad:-pad]
        return x + y


class NoiseBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.linear = nn.Conv1d(dim, dim, 1, bias=False)

    def forward(self, x):
        b, _, t = x.shape
        noise = torch.randn((b, 1, t), device=x.device, dtype=x.dtype)
        return x + noise * self.linear(x)


class DecoderBlock(nn.Module):
    def __init__(self, input_dim, output_dim, stride, snac, noise=False, groups=1):
        super().__init__()
        # DAC's has no output_padding; SNAC's adds stride % 2.
        extra = dict(output_padding=stride % 2) if snac else {}
        layers = [Snake1d(input_dim),
                  nn.ConvTranspose1d(input_dim, output_dim, 2 * stride, stride, padding=math.ceil(stride / 2), **extra)]
        if noise:
            layers.append(NoiseBlock(output_dim))
        layers += [ResidualUnit(output_dim, 1, groups=groups), ResidualUnit(output_dim, 3, groups=groups),
                   ResidualUnit(output_dim, 9, groups=groups)]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return self.block(x)


class Decoder(nn.Module):
    def __init__(self, input_channel, channels, rates, snac, noise=False, depthwise=False):
        super().__init__()
        if depthwise:
            layers = [nn.Conv1d(input_channel, input_channel, 7, padding=3, groups=input_channel),
                      nn.Conv1d(input_channel, channels, 1)]
        else:
            layers = [nn.Conv1d(input_channel, channels, 7, padding=3)]
        for i, stride in enumerate(rates):
            input_dim, output_dim = channels // 2 ** i, channels // 2 ** (i + 1)
            layers.append(DecoderBlock(input_dim, output_dim, stride, snac, noise, groups=output_dim if depthwise else 1))
        layers += [Snake1d(output_dim), nn.Conv1d(output_dim, 1, 7, padding=3), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--model", choices=["dac", "snac"], default="dac")
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--channels", type=int, default=64, help="the decoder's first width (DAC 44 kHz: 1536)")
    parser.add_argument("--rates", type=int, nargs="+", default=[4, 2], help="upsampling strides (DAC 44 kHz: 8 8 4 2)")
    parser.add_argument("--latent", type=int, default=32, help="input channels (DAC 44 kHz: 1024)")
    parser.add_argument("--depthwise", action="store_true", help="SNAC's depthwise Conv1ds")
    parser.add_argument("--noise", action="store_true", help="SNAC's NoiseBlocks (random: no two runs agree)")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()
    if args.frames < 1 or args.latent < 1 or args.channels < 2 ** len(args.rates) or min(args.rates) < 1:
        parser.error("--frames and --latent must be at least 1, --rates at least 1, --channels at least 2^len(--rates)")
    torch.manual_seed(0)
    model = Decoder(args.latent, args.channels, args.rates, args.model == "snac", args.noise, args.depthwise).eval()
    x = torch.randn(1, args.latent, args.frames)
    with torch.no_grad():
        torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["latent"], output_names=["audio"])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
