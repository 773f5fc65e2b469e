#!/usr/bin/env python3
"""Exports rosinality's StyleGAN2 generator (the one GPEN and GFPGAN v1 build on) with seeded random weights, on its
CPU path, as torch.onnx.export writes it. Its upsamplers run op/upfirdn2d.py's upfirdn2d_native, which folds the
channels into the batch axis: the [N, C, H, W] input becomes [N*C, H, W, 1], zero insertion by view / pad / view, a
pad, a permute to [N*C, 1, H', W'], and a single-channel conv2d with the flipped 4x4 blur kernel, then back to
[N, C, 2H, 2W]. In ONNX: Reshape, Pad, Reshape, Pad, Slice, Transpose, Reshape, a Conv with one input and one output
channel on a batch of N*C, Reshape, Transpose, Slice, Reshape. Each ToRGB's skip Upsample (x2, pads 2+1) is one;
each upsampling StyledConv's Blur after its transposed conv is another, pad-only one (up 1, pads 1+1).
dwdeconv-rewrite (before this form): the ToRGB upsamples get no plan row at all.

Written after rosinality/stylegan2-pytorch: model.py (make_kernel, Upsample, Blur, EqualLinear, ModulatedConv2d with
fused=True, NoiseInjection, ConstantInput, StyledConv, ToRGB, Generator's channels, layers and forward),
op/upfirdn2d.py (upfirdn2d and upfirdn2d_native, line for line) and op/fused_act.py (fused_leaky_relu's CPU path).

Differences from rosinality's generator, for a test model: weights are seeded random draws (rosinality's own init
plus random biases, which training moves off 0), not a checkpoint; the input is the latent `latent`
[1, n_latent, style_dim] (Generator(..., input_is_latent=True), as GPEN and GFPGAN feed it; the style MLP has no
convolution); ModulatedConv2d reads its input's batch and channel count as ints (torch 1.13 cannot export the Conv
otherwise); noise is the generator's fixed noise buffers (randomize_noise=False: a random draw cannot be exported
and compared); --channel-divisor divides every channel count (1 is rosinality's, channel_multiplier 2).

Usage: python3 examples/export_rosinality_stylegan2.py OUT.onnx [--size 256] [--style-dim 512]
                                                      [--channel-divisor 1] [--opset 13]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


def upfirdn2d(input, kernel, up=1, down=1, pad=(0, 0)):
    """op/upfirdn2d.py's upfirdn2d on CPU: upfirdn2d_native."""
    up = (up, up)
    down = (down, down)
    if len(pad) == 2:
        pad = (pad[0], pad[1], pad[0], pad[1])
    return upfirdn2d_native(input, kernel, *up, *down, *pad)


def upfirdn2d_native(input, kernel, up_x, up_y, down_x, down_y, pad_x0, pad_x1, pad_y0, pad_y1):
    """op/upfirdn2d.py's upfirdn2d_native, unchanged."""
    _, channel, in_h, in_w = input.shape
    input = input.reshape(-1, in_h, in_w, 1)

    _, in_h, in_w, minor = input.shape
    kernel_h, kernel_w = kernel.shape

    out = input.view(-1, in_h, 1, in_w, 1, minor)
    out = F.pad(out, [0, 0, 0, up_x - 1, 0, 0, 0, up_y - 1])
    out = out.view(-1, in_h * up_y, in_w * up_x, minor)

    out = F.pad(out, [0, 0, max(pad_x0, 0), max(pad_x1, 0), max(pad_y0, 0), max(pad_y1, 0)])
    out = out[:, max(-pad_y0, 0): out.shape[1] - max(-pad_y1, 0), max(-pad_x0, 0): out.shape[2] - max(-pad_x1, 0), :]

    out = out.permute(0, 3, 1, 2)
    out = out.reshape([-1, 1, in_h * up_y + pad_y0 + pad_y1, in_w * up_x + pad_x0 + pad_x1])
    w = torch.flip(kernel, [0, 1]).view(1, 1, kernel_h, kernel_w)
    out = F.conv2d(out, w)
    out = out.reshape(-1, minor, in_h * up_y + pad_y0 + pad_y1 - kernel_h + 1,
                      in_w * up_x + pad_x0 + pad_x1 - kernel_w + 1)
    out = out.permute(0, 2, 3, 1)
    out = out[:, ::down_y, ::down_x, :]

    out_h = (in_h * up_y + pad_y0 + pad_y1 - kernel_h + down_y) // down_y
    out_w = (in_w * up_x + pad_x0 + pad_x1 - kernel_w + down_x) // down_x

    return out.view(-1, channel, out_h, out_w)


def fused_leaky_relu(input, bias=None, negative_slope=0.2, scale=2 ** 0.5):
    """op/fused_act.py's fused_leaky_relu, CPU path."""
    rest_dim = [1] * (input.ndim - bias.ndim - 1)
    return F.leaky_relu(input + bias.view(1, bias.shape[0], *rest_dim), negative_slope=0.2) * scale


def make_kernel(k):
    k = torch.tensor(k, dtype=torch.float32)
    if k.ndim == 1:
        k = k[None, :] * k[:, None]
    k /= k.sum()
    return k


class Upsample(nn.Module):
    def __init__(self, kernel, factor=2):
        super().__init__()
        self.factor = factor
        kernel = make_kernel(kernel) * (factor ** 2)
        self.register_buffer("kernel", kernel)
        p = kernel.shape[0] - factor
        pad0 = (p + 1) // 2 + factor - 1
        pad1 = p // 2
        self.pad = (pad0, pad1)

    def forward(self, input):
        return upfirdn2d(input, self.kernel, up=self.factor, down=1, pad=self.pad)


class Blur(nn.Module):
    def __init__(self, kernel, pad, upsample_factor=1):
        super().__init__()
        kernel = make_kernel(kernel)
        if upsample_factor > 1:
            kernel = kernel * (upsample_factor ** 2)
        self.register_buffer("kernel", kernel)
        self.pad = pad

    def forward(self, input):
        return upfirdn2d(input, self.kernel, pad=self.pad)


class EqualLinear(nn.Module):
    """model.py's EqualLinear without activation (the modulation layers)."""

    def __init__(self, in_dim, out_dim, bias_init=0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim))
        self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init))
        self.scale = 1 / math.sqrt(in_dim)

    def forward(self, input):
        return F.linear(input, self.weight * self.scale, bias=self.bias)


class ModulatedConv2d(nn.Module):
    """model.py's ModulatedConv2d, fused=True, no downsample."""

    def __init__(self, in_channel, out_channel, kernel_size, style_dim, demodulate=True, upsample=False,
                 blur_kernel=(1, 3, 3, 1)):
        super().__init__()
        self.eps = 1e-8
        self.kernel_size = kernel_size
        self.in_channel = in_channel
        self.out_channel = out_channel
        self.upsample = upsample
        if upsample:
            factor = 2
            p = (len(blur_kernel) - factor) - (kernel_size - 1)
            pad0 = (p + 1) // 2 + factor - 1
            pad1 = p // 2 + 1
            self.blur = Blur(blur_kernel, pad=(pad0, pad1), upsample_factor=factor)
        fan_in = in_channel * kernel_size ** 2
        self.scale = 1 / math.sqrt(fan_in)
        self.padding = kernel_size // 2
        self.weight = nn.Parameter(torch.randn(1, out_channel, in_channel, kernel_size, kernel_size))
        self.modulation = EqualLinear(style_dim, in_channel, bias_init=1)
        self.demodulate = demodulate

    def forward(self, input, style):
        batch, in_channel, height, width = input.shape
        # Python ints (upstream: traced), so that torch 1.13 knows the weight's shape: it cannot export a Conv whose
        # kernel shape it does not know, and the sizes of upfirdn2d_native's output it does not.
        batch, in_channel = int(batch), int(in_channel)
        style = self.modulation(style).view(batch, 1, in_channel, 1, 1)
        weight = self.scale * self.weight * style
        if self.demodulate:
            demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
            weight = weight * demod.view(batch, self.out_channel, 1, 1, 1)
        weight = weight.view(batch * self.out_channel, in_channel, self.kernel_size, self.kernel_size)
        if self.upsample:
            input = input.view(1, batch * in_channel, height, width)
            weight = weight.view(batch, self.out_channel, in_channel, self.kernel_size, self.kernel_size)
            weight = weight.transpose(1, 2).reshape(batch * in_channel, self.out_channel, self.kernel_size,
                                                    self.kernel_size)
            out = F.conv_transpose2d(input, weight, padding=0, stride=2, groups=batch)
            _, _, height, width = out.shape
            out = out.view(batch, self.out_channel, height, width)
            out = self.blur(out)
        else:
            input = input.view(1, batch * in_channel, height, width)
            out = F.conv2d(input, weight, padding=self.padding, groups=batch)
            _, _, height, width = out.shape
            out = out.view(batch, self.out_channel, height, width)
        return out


class NoiseInjection(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1) * 0.1)  # upstream: zeros, moved by training

    def forward(self, image, noise):
        return image + self.weight * noise


class StyledConv(nn.Module):
    def __init__(self, in_channel, out_channel, kernel_size, style_dim, upsample=False, blur_kernel=(1, 3, 3, 1)):
        super().__init__()
        self.conv = ModulatedConv2d(in_channel, out_channel, kernel_size, style_dim, upsample=upsample,
                                    blur_kernel=blur_kernel)
        self.noise = NoiseInjection()
        self.bias = nn.Parameter(torch.randn(out_channel) * 0.1)  # FusedLeakyReLU's bias; upstream: zeros

    def forward(self, input, style, noise):
        out = self.conv(input, style)
        out = self.noise(out, noise=noise)
        return fused_leaky_relu(out, self.bias)


class ToRGB(nn.Module):
    def __init__(self, in_channel, style_dim, upsample=True, blur_kernel=(1, 3, 3, 1)):
        super().__init__()
        if upsample:
            self.upsample = Upsample(blur_kernel)
        self.conv = ModulatedConv2d(in_channel, 3, 1, style_dim, demodulate=False)
        self.bias = nn.Parameter(torch.randn(1, 3, 1, 1) * 0.1)  # upstream: zeros

    def forward(self, input, style, skip=None):
        out = self.conv(input, style)
        out = out + self.bias
        if skip is not None:
            skip = self.upsample(skip)
            out = out + skip
        return out


class Generator(nn.Module):
    """model.py's Generator(size, style_dim, channel_multiplier=2) from its latent, with its noise buffers."""

    def __init__(self, size, style_dim, channel_divisor):
        super().__init__()
        base = {4: 512, 8: 512, 16: 512, 32: 512, 64: 512, 128: 256, 256: 128, 512: 64, 1024: 32}
        self.channels = {k: max(1, v // channel_divisor) for k, v in base.items()}
        self.input = nn.Parameter(torch.randn(1, self.channels[4], 4, 4))  # ConstantInput
        self.conv1 = StyledConv(self.channels[4], self.channels[4], 3, style_dim)
        self.to_rgb1 = ToRGB(self.channels[4], style_dim, upsample=False)
        self.log_size = int(math.log(size, 2))
        self.num_layers = (self.log_size - 2) * 2 + 1
        self.convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        self.noises = nn.Module()
        in_channel = self.channels[4]
        for layer_idx in range(self.num_layers):
            res = (layer_idx + 5) // 2
            self.noises.register_buffer(f"noise_{layer_idx}", torch.randn(1, 1, 2 ** res, 2 ** res))
        for i in range(3, self.log_size + 1):
            out_channel = self.channels[2 ** i]
            self.convs.append(StyledConv(in_channel, out_channel, 3, style_dim, upsample=True))
            self.convs.append(StyledConv(out_channel, out_channel, 3, style_dim))
            self.to_rgbs.append(ToRGB(out_channel, style_dim))
            in_channel = out_channel
        self.n_latent = self.log_size * 2 - 2

    def forward(self, latent):
        noise = [getattr(self.noises, f"noise_{i}") for i in range(self.num_layers)]
        out = self.input.repeat(latent.shape[0], 1, 1, 1)
        out = self.conv1(out, latent[:, 0], noise=noise[0])
        skip = self.to_rgb1(out, latent[:, 1])
        i = 1
        for conv1, conv2, noise1, noise2, to_rgb in zip(self.convs[::2], self.convs[1::2], noise[1::2], noise[2::2],
                                                        self.to_rgbs):
            out = conv1(out, latent[:, i], noise=noise1)
            out = conv2(out, latent[:, i + 1], noise=noise2)
            skip = to_rgb(out, latent[:, i + 2], skip)
            i += 2
        return skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=256, choices=[8, 16, 32, 64, 128, 256, 512, 1024])
    parser.add_argument("--style-dim", type=int, default=512)
    parser.add_argument("--channel-divisor", type=int, default=1, choices=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Generator(args.size, args.style_dim, args.channel_divisor).eval()
    latent = torch.randn(1, model.n_latent, args.style_dim)
    with torch.no_grad():
        torch.onnx.export(model, (latent,), args.out, opset_version=args.opset, input_names=["latent"],
                          output_names=["image"])
    out = args.out[:-5] if args.out.endswith(".onnx") else args.out
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {out}.xnn.onnx --target xnnpack --verify")


if __name__ == "__main__":
    main()
