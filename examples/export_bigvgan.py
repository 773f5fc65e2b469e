#!/usr/bin/env python3
"""Exports BigVGAN v2 (NVIDIA/BigVGAN, v2.4) with seeded random weights, as torch.onnx.export writes it: one
Activation1d, one AMP block, or the whole generator.

Every Activation1d runs UpSample1d (alias_free_activation/torch/resample.py): a replicate Pad of 5 + 5 samples, a
depthwise conv_transpose1d (groups = C, the kaiser-sinc filter, kernel 12, stride 2) times 2, and a crop [15:-15];
then Snake or SnakeBeta; then DownSample1d (a replicate Pad and a depthwise stride-2 Conv1d). The 24 kHz 100-band
config holds 109 of them: 6 stages x 3 AMPBlock1 x 6 plus activation_post, at C = 768, 384, 192, 96, 48, 24.

Written after bigvgan.py (BigVGAN, AMPBlock1), activations.py (Snake, SnakeBeta), alias_free_activation/torch/
(act.py, resample.py, filter.py) and configs/bigvgan_v2_24khz_100band_256x.json. Differences, none in what is
exported: weight_norm is left out (BigVGAN's inference calls remove_weight_norm before use, which leaves plain
Conv1d weights); UpSample1d and LowPassFilter1d read the channel count from the module, a Python int, instead of
`_, C, _ = x.shape` (torch 1.13 cannot export the traced size that expand() then gets, pytorch/pytorch#98497); the
Snake parameters are random (log-scale, so Exp appears as the model exports it) so that no activation is an identity.

Usage: python3 examples/export_bigvgan.py OUT.onnx [--what activation|amp|generator] [--preset v2_24khz|small]
                                                   [--frames 32] [--channels C] [--length L] [--opset 17]
  --what activation: one Activation1d (SnakeBeta) on [1, C, L] (default C 96, L 6000: the 4th stage of 24 kHz);
  --what amp: one AMPBlock1 (kernel 3, dilations 1, 3, 5: 6 Activation1d) on [1, C, L];
  --what generator: the whole BigVGAN v2 on a mel spectrogram [1, 100, frames] (32 frames: 8192 samples, 0.34 s).
  --preset small: a 2-stage generator (initial channels 96: stages of 48 and 24, rates 4 and 2, resblock kernels 3
                  and 7): 25 UpSample1d.
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse
import math

import torch
from torch import nn
from torch.nn import functional as F

PRESETS = {
    # configs/bigvgan_v2_24khz_100band_256x.json
    "v2_24khz": dict(num_mels=100, upsample_rates=[4, 4, 2, 2, 2, 2], upsample_kernel_sizes=[8, 8, 4, 4, 4, 4],
                     upsample_initial_channel=1536, resblock_kernel_sizes=[3, 7, 11],
                     resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5], [1, 3, 5]]),
    "small": dict(num_mels=100, upsample_rates=[4, 2], upsample_kernel_sizes=[8, 4], upsample_initial_channel=96,
                  resblock_kernel_sizes=[3, 7], resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5]]),
}


def kaiser_sinc_filter1d(cutoff, half_width, kernel_size):
    """filter.py's, for an even kernel: [1, 1, kernel_size], normalised to sum 1."""
    half_size = kernel_size // 2
    delta_f = 4 * half_width
    a = 2.285 * (half_size - 1) * math.pi * delta_f + 7.95
    if a > 50.0:
        beta = 0.1102 * (a - 8.7)
    elif a >= 21.0:
        beta = 0.5842 * (a - 21) ** 0.4 + 0.07886 * (a - 21.0)
    else:
        beta = 0.0
    window = torch.kaiser_window(kernel_size, beta=beta, periodic=False)
    time = torch.arange(-half_size, half_size) + 0.5
    filter_ = 2 * cutoff * window * torch.sinc(2 * cutoff * time)
    filter_ /= filter_.sum()
    return filter_.view(1, 1, kernel_size)


class UpSample1d(nn.Module):
    def __init__(self, channels, ratio=2, kernel_size=12):
        super().__init__()
        self.channels = channels
        self.ratio = ratio
        self.kernel_size = kernel_size
        self.stride = ratio
        self.pad = self.kernel_size // ratio - 1
        self.pad_left = self.pad * self.stride + (self.kernel_size - self.stride) // 2
        self.pad_right = self.pad * self.stride + (self.kernel_size - self.stride + 1) // 2
        self.register_buffer("filter", kaiser_sinc_filter1d(0.5 / ratio, 0.6 / ratio, kernel_size))

    def forward(self, x):
        x = F.pad(x, (self.pad, self.pad), mode="replicate")
        x = self.ratio * F.conv_transpose1d(x, self.filter.expand(self.channels, -1, -1), stride=self.stride,
                                            groups=self.channels)
        return x[..., self.pad_left:-self.pad_right]


class DownSample1d(nn.Module):
    """LowPassFilter1d with stride = ratio, replicate padding (kernel 12: 5 left, 6 right)."""

    def __init__(self, channels, ratio=2, kernel_size=12):
        super().__init__()
        self.channels = channels
        self.stride = ratio
        self.pad_left = kernel_size // 2 - 1
        self.pad_right = kernel_size // 2
        self.register_buffer("filter", kaiser_sinc_filter1d(0.5 / ratio, 0.6 / ratio, kernel_size))

    def forward(self, x):
        x = F.pad(x, (self.pad_left, self.pad_right), mode="replicate")
        return F.conv1d(x, self.filter.expand(self.channels, -1, -1), stride=self.stride, groups=self.channels)


class SnakeBeta(nn.Module):
    """x + 1/(exp(beta) + 1e-9) * sin(x * exp(alpha))^2 (alpha_logscale, as the v2 configs set it)."""

    def __init__(self, channels):
        super().__init__()
        self.alpha = nn.Parameter(torch.empty(channels).uniform_(-0.5, 0.5))
        self.beta = nn.Parameter(torch.empty(channels).uniform_(-0.5, 0.5))
        self.no_div_by_zero = 0.000000001

    def forward(self, x):
        alpha = torch.exp(self.alpha.unsqueeze(0).unsqueeze(-1))
        beta = torch.exp(self.beta.unsqueeze(0).unsqueeze(-1))
        return x + (1.0 / (beta + self.no_div_by_zero)) * torch.pow(torch.sin(x * alpha), 2)


class Activation1d(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.upsample = UpSample1d(channels)
        self.act = SnakeBeta(channels)
        self.downsample = DownSample1d(channels)

    def forward(self, x):
        return self.downsample(self.act(self.upsample(x)))


def get_padding(kernel_size, dilation=1):
    return int((kernel_size * dilation - dilation) / 2)


class AMPBlock1(nn.Module):
    def __init__(self, channels, kernel_size=3, dilation=(1, 3, 5)):
        super().__init__()
        self.convs1 = nn.ModuleList([nn.Conv1d(channels, channels, kernel_size, 1, dilation=d,
                                               padding=get_padding(kernel_size, d)) for d in dilation])
        self.convs2 = nn.ModuleList([nn.Conv1d(channels, channels, kernel_size, 1, dilation=1,
                                               padding=get_padding(kernel_size, 1)) for _ in dilation])
        self.activations = nn.ModuleList([Activation1d(channels) for _ in range(2 * len(dilation))])
        for conv in list(self.convs1) + list(self.convs2):
            conv.weight.data.normal_(0.0, 0.01)  # utils.init_weights

    def forward(self, x):
        acts1, acts2 = self.activations[::2], self.activations[1::2]
        for c1, c2, a1, a2 in zip(self.convs1, self.convs2, acts1, acts2):
            xt = c2(a2(c1(a1(x))))
            x = xt + x
        return x


class BigVGAN(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.num_kernels = len(h["resblock_kernel_sizes"])
        self.num_upsamples = len(h["upsample_rates"])
        c0 = h["upsample_initial_channel"]
        self.conv_pre = nn.Conv1d(h["num_mels"], c0, 7, 1, padding=3)
        self.ups = nn.ModuleList()
        for i, (u, k) in enumerate(zip(h["upsample_rates"], h["upsample_kernel_sizes"])):
            up = nn.ConvTranspose1d(c0 // (2 ** i), c0 // (2 ** (i + 1)), k, u, padding=(k - u) // 2)
            up.weight.data.normal_(0.0, 0.01)
            self.ups.append(up)
        self.resblocks = nn.ModuleList()
        for i in range(self.num_upsamples):
            ch = c0 // (2 ** (i + 1))
            for k, d in zip(h["resblock_kernel_sizes"], h["resblock_dilation_sizes"]):
                self.resblocks.append(AMPBlock1(ch, k, d))
        self.activation_post = Activation1d(ch)
        self.conv_post = nn.Conv1d(ch, 1, 7, 1, padding=3, bias=False)  # use_bias_at_final: false
        self.conv_post.weight.data.normal_(0.0, 0.01)

    def forward(self, x):
        x = self.conv_pre(x)
        for i in range(self.num_upsamples):
            x = self.ups[i](x)
            xs = None
            for j in range(self.num_kernels):
                r = self.resblocks[i * self.num_kernels + j](x)
                xs = r if xs is None else xs + r
            x = xs / self.num_kernels
        x = self.conv_post(self.activation_post(x))
        return torch.clamp(x, min=-1.0, max=1.0)  # use_tanh_at_final: false


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--what", choices=["activation", "amp", "generator"], default="generator")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--frames", type=int, default=32, help="mel frames of the generator's input")
    parser.add_argument("--channels", type=int, default=96, help="C of --what activation or amp")
    parser.add_argument("--length", type=int, default=6000, help="L of --what activation or amp")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()
    for name, value in (("--frames", args.frames), ("--channels", args.channels), ("--length", args.length)):
        if value < 1:
            parser.error(f"{name} must be at least 1, got {value}")
    torch.manual_seed(0)
    if args.what == "generator":
        h = PRESETS[args.preset]
        model = BigVGAN(h).eval()
        x = torch.randn(1, h["num_mels"], args.frames)
        names = (["mel"], ["audio"])
    else:
        model = (Activation1d(args.channels) if args.what == "activation" else AMPBlock1(args.channels)).eval()
        x = torch.randn(1, args.channels, args.length)
        names = (["x"], ["y"])
    with torch.no_grad():
        torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=names[0],
                          output_names=names[1])
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {args.out[:-5]}.xnn.onnx --verify")


if __name__ == "__main__":
    main()
