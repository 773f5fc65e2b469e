#!/usr/bin/env python3
"""Exports StyleGAN3's synthesis network (or a range of its layers) with seeded random weights, on its reference path
(impl='ref', the path every CPU run and every ONNX export takes): each SynthesisLayer's filtered leaky ReLU is
bias, upfirdn2d up (zero insertion x2 or x4 by Reshape / Pad / Reshape, a Pad or a crop by Slice for negative pads,
then the separable K-tap low-pass filter as a 1xK and a Kx1 depthwise Conv, K 12 or 24), leaky ReLU x sqrt(2),
clamp, and upfirdn2d down (the 1xK and Kx1 down filter, then a Slice ::2). dwdeconv-rewrite (before the FIR pair
form): every up path kept, "not a clean upscale: output is 2*H+17" (the 1xK Conv judged alone).

Written after NVlabs/stylegan3: training/networks_stylegan3.py (modulated_conv2d, FullyConnectedLayer,
SynthesisInput, SynthesisLayer with its filter design and padding, SynthesisNetwork's cutoff, stopband, sampling
rate, size and channel progression), torch_utils/ops/filtered_lrelu.py (_filtered_lrelu_ref), upfirdn2d.py
(_upfirdn2d_ref, separable filters: conv2d with f.unsqueeze(2) then f.unsqueeze(3), flipped) and bias_act.py
(_bias_act_ref). Defaults: StyleGAN3-T at 256x256 (train.py's --cbase 32768 --cmax 512, 14 layers, 2 critically
sampled, margin 10): L0-L2, L4, L6, L8, L9, L11-L13 upsample x2 (12 taps), L3, L5, L7, L10 x4 (24 taps, pads -6
and -9: a crop), L13 crops its 276 to 256 (pads -11, -12), L14 is ToRGB.

Differences from StyleGAN3, for a test model: weights are seeded random draws (StyleGAN3's own init, plus random
biases and magnitude_ema, which training moves off 0 and 1), not a checkpoint; the input is the synthesis
network's `ws` [1, num_ws, w_dim] (the mapping network has no convolution); SynthesisInput's sampling grid, which
depends on constants only, is computed once in __init__ (torch 1.13 has no ONNX export of affine_grid), and
upfirdn2d repeats its filter int(x.shape[1]) times (torch 1.13 cannot export the Conv otherwise); filters are
designed by a NumPy copy of scipy.signal.firwin's Kaiser design (no SciPy needed); only the T config (its radial
filters are the R config's, for non-critically sampled down filters). --layers A:B exports layers A to B-1 alone
(from A > 0 with the feature map `x` as a second input), --channel-max reduces the channels.

Usage: python3 examples/export_stylegan3.py OUT.onnx [--resolution 256] [--channel-base 32768] [--channel-max 512]
                                           [--layers A:B] [--opset 13]
The same command writes the same bytes on every run (PyTorch 1.13).
Needs PyTorch and NumPy (Debian: apt-get install python3-torch); the tool itself does not use Python.
"""
import argparse

import numpy as np
import torch


def firwin_kaiser(numtaps, cutoff, width, fs):
    """scipy.signal.firwin(numtaps, cutoff, width=width, fs=fs): a low-pass windowed sinc with the Kaiser window
    whose beta meets the transition width (kaiser_atten, kaiser_beta), scaled to unit gain at DC."""
    nyq = fs / 2
    atten = 2.285 * (numtaps - 1) * np.pi * (width / nyq) + 7.95
    beta = 0.1102 * (atten - 8.7) if atten > 50 else 0.5842 * (atten - 21) ** 0.4 + 0.07886 * (atten - 21) \
        if atten > 21 else 0.0
    m = np.arange(numtaps) - (numtaps - 1) / 2
    h = (cutoff / nyq) * np.sinc((cutoff / nyq) * m) * np.kaiser(numtaps, beta)
    return h / h.sum()


def upfirdn2d_ref(x, f, up=1, down=1, padding=(0, 0, 0, 0), gain=1):
    """upfirdn2d.py's _upfirdn2d_ref with flip_filter=False; f None (identity, [1, 1]) or separable ([taps])."""
    if f is None:
        f = torch.ones([1, 1], dtype=torch.float32)
    batch_size, num_channels, in_height, in_width = x.shape
    padx0, padx1, pady0, pady1 = padding

    # Upsample by inserting zeros.
    x = x.reshape([batch_size, num_channels, in_height, 1, in_width, 1])
    x = torch.nn.functional.pad(x, [0, up - 1, 0, 0, 0, up - 1])
    x = x.reshape([batch_size, num_channels, in_height * up, in_width * up])

    # Pad or crop.
    x = torch.nn.functional.pad(x, [max(padx0, 0), max(padx1, 0), max(pady0, 0), max(pady1, 0)])
    x = x[:, :, max(-pady0, 0): x.shape[2] - max(-pady1, 0), max(-padx0, 0): x.shape[3] - max(-padx1, 0)]

    # Setup filter.
    f = f * (gain ** (f.ndim / 2))
    f = f.to(x.dtype)
    f = f.flip(list(range(f.ndim)))

    # Convolve with the filter. The repeat count as a Python int (upstream: x.shape[1], traced), so that torch 1.13
    # knows the weight's shape: it cannot export a Conv whose kernel shape it does not know, and the channel count
    # of a modulated conv's output, reshaped with a -1, it does not.
    f = f[np.newaxis, np.newaxis].repeat([int(num_channels), 1] + [1] * f.ndim)
    if f.ndim == 4:
        x = torch.nn.functional.conv2d(input=x, weight=f, groups=num_channels)
    else:
        x = torch.nn.functional.conv2d(input=x, weight=f.unsqueeze(2), groups=num_channels)
        x = torch.nn.functional.conv2d(input=x, weight=f.unsqueeze(3), groups=num_channels)

    # Downsample by throwing away pixels.
    x = x[:, :, ::down, ::down]
    return x


def bias_act_ref(x, b=None, act="linear", alpha=0.2, gain=1.0, clamp=None):
    """bias_act.py's _bias_act_ref for 'linear' and 'lrelu' on dim 1."""
    if b is not None:
        x = x + b.reshape([-1 if i == 1 else 1 for i in range(x.ndim)])
    if act == "lrelu":
        x = torch.nn.functional.leaky_relu(x, alpha)
    if gain != 1:
        x = x * gain
    if clamp is not None and clamp >= 0:
        x = x.clamp(-clamp, clamp)
    return x


def filtered_lrelu_ref(x, fu, fd, b, up, down, padding, gain, slope, clamp):
    """filtered_lrelu.py's _filtered_lrelu_ref with flip_filter=False."""
    x = bias_act_ref(x, b)  # Apply bias.
    x = upfirdn2d_ref(x, fu, up=up, padding=padding, gain=up ** 2)  # Upsample.
    x = bias_act_ref(x, act="lrelu", alpha=slope, gain=gain, clamp=clamp)  # Bias, leaky ReLU, clamp.
    x = upfirdn2d_ref(x, fd, down=down)  # Downsample.
    return x


def modulated_conv2d(x, w, s, demodulate=True, padding=0, input_gain=None):
    """networks_stylegan3.py's modulated_conv2d."""
    batch_size = int(x.shape[0])
    out_channels, in_channels, kh, kw = w.shape
    if demodulate:  # Pre-normalize inputs.
        w = w * w.square().mean([1, 2, 3], keepdim=True).rsqrt()
        s = s * s.square().mean().rsqrt()
    w = w.unsqueeze(0)  # Modulate weights. [NOIkk]
    w = w * s.unsqueeze(1).unsqueeze(3).unsqueeze(4)
    if demodulate:  # Demodulate weights.
        dcoefs = (w.square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
        w = w * dcoefs.unsqueeze(2).unsqueeze(3).unsqueeze(4)
    if input_gain is not None:  # Apply input scaling.
        input_gain = input_gain.expand(batch_size, in_channels)
        w = w * input_gain.unsqueeze(1).unsqueeze(3).unsqueeze(4)
    # Execute as one fused op using grouped convolution.
    x = x.reshape(1, -1, *x.shape[2:])
    w = w.reshape(-1, in_channels, kh, kw)
    x = torch.nn.functional.conv2d(input=x, weight=w.to(x.dtype), padding=padding, groups=batch_size)
    x = x.reshape(batch_size, -1, *x.shape[2:])
    return x


class FullyConnectedLayer(torch.nn.Module):
    """networks_stylegan3.py's FullyConnectedLayer, activation 'linear' (the affine layers)."""

    def __init__(self, in_features, out_features, weight_init=1, bias_init=0):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn([out_features, in_features]) * weight_init)
        bias_init = np.broadcast_to(np.asarray(bias_init, dtype=np.float32), [out_features])
        self.bias = torch.nn.Parameter(torch.from_numpy(bias_init.copy()))
        self.weight_gain = 1 / np.sqrt(in_features)

    def forward(self, x):
        w = self.weight.to(x.dtype) * self.weight_gain
        return torch.addmm(self.bias.to(x.dtype).unsqueeze(0), x, w.t())


class SynthesisInput(torch.nn.Module):
    """networks_stylegan3.py's SynthesisInput; the sampling grid (constants only) computed here, not in forward."""

    def __init__(self, w_dim, channels, size, sampling_rate, bandwidth):
        super().__init__()
        self.channels = channels
        self.size = np.broadcast_to(np.asarray(size), [2])
        self.sampling_rate = sampling_rate
        self.bandwidth = bandwidth
        freqs = torch.randn([self.channels, 2])  # Draw random frequencies from uniform 2D disc.
        radii = freqs.square().sum(dim=1, keepdim=True).sqrt()
        freqs /= radii * radii.square().exp().pow(0.25)
        freqs *= bandwidth
        phases = torch.rand([self.channels]) - 0.5
        self.weight = torch.nn.Parameter(torch.randn([self.channels, self.channels]))
        self.affine = FullyConnectedLayer(w_dim, 4, weight_init=0, bias_init=[1, 0, 0, 0])
        self.register_buffer("transform", torch.eye(3, 3))
        self.register_buffer("freqs", freqs)
        self.register_buffer("phases", phases)
        theta = torch.eye(2, 3)  # Construct sampling grid.
        theta[0, 0] = 0.5 * self.size[0] / self.sampling_rate
        theta[1, 1] = 0.5 * self.size[1] / self.sampling_rate
        grids = torch.nn.functional.affine_grid(theta.unsqueeze(0), [1, 1, self.size[1], self.size[0]],
                                                align_corners=False)
        self.register_buffer("grids", grids)

    def forward(self, w):
        transforms = self.transform.unsqueeze(0)
        freqs = self.freqs.unsqueeze(0)
        phases = self.phases.unsqueeze(0)
        t = self.affine(w)  # t = (r_c, r_s, t_x, t_y)
        t = t / t[:, :2].norm(dim=1, keepdim=True)
        m_r = torch.eye(3, device=w.device).unsqueeze(0).repeat([w.shape[0], 1, 1])
        m_r[:, 0, 0] = t[:, 0]
        m_r[:, 0, 1] = -t[:, 1]
        m_r[:, 1, 0] = t[:, 1]
        m_r[:, 1, 1] = t[:, 0]
        m_t = torch.eye(3, device=w.device).unsqueeze(0).repeat([w.shape[0], 1, 1])
        m_t[:, 0, 2] = -t[:, 2]
        m_t[:, 1, 2] = -t[:, 3]
        transforms = m_r @ m_t @ transforms
        phases = phases + (freqs @ transforms[:, :2, 2:]).squeeze(2)
        freqs = freqs @ transforms[:, :2, :2]
        amplitudes = (1 - (freqs.norm(dim=2) - self.bandwidth) / (self.sampling_rate / 2 - self.bandwidth)).clamp(0, 1)
        x = (self.grids.unsqueeze(3) @ freqs.permute(0, 2, 1).unsqueeze(1).unsqueeze(2)).squeeze(3)
        x = x + phases.unsqueeze(1).unsqueeze(2)
        x = torch.sin(x * (np.pi * 2))
        x = x * amplitudes.unsqueeze(1).unsqueeze(2)
        weight = self.weight / np.sqrt(self.channels)
        x = x @ weight.t()
        return x.permute(0, 3, 1, 2)  # [batch, channel, height, width]


class SynthesisLayer(torch.nn.Module):
    """networks_stylegan3.py's SynthesisLayer (non-radial filters, fp32), forward on the reference path."""

    def __init__(self, w_dim, is_torgb, in_channels, out_channels, in_size, out_size, in_sampling_rate,
                 out_sampling_rate, in_cutoff, out_cutoff, in_half_width, out_half_width,
                 conv_kernel=3, filter_size=6, lrelu_upsampling=2, conv_clamp=256):
        super().__init__()
        self.is_torgb = is_torgb
        self.in_channels = in_channels
        self.out_size = np.broadcast_to(np.asarray(out_size), [2])
        in_size = np.broadcast_to(np.asarray(in_size), [2])
        tmp_sampling_rate = max(in_sampling_rate, out_sampling_rate) * (1 if is_torgb else lrelu_upsampling)
        self.conv_kernel = 1 if is_torgb else conv_kernel
        self.conv_clamp = conv_clamp
        self.affine = FullyConnectedLayer(w_dim, in_channels, bias_init=1)
        self.weight = torch.nn.Parameter(torch.randn([out_channels, in_channels, self.conv_kernel, self.conv_kernel]))
        self.bias = torch.nn.Parameter(torch.randn([out_channels]) * 0.1)  # upstream: zeros, moved by training
        self.register_buffer("magnitude_ema", torch.rand([]) * 1.5 + 0.5)  # upstream: ones, moved by training

        # Design upsampling filter.
        self.up_factor = int(np.rint(tmp_sampling_rate / in_sampling_rate))
        self.up_taps = filter_size * self.up_factor if self.up_factor > 1 and not self.is_torgb else 1
        self.up_filter = self.design_lowpass_filter(self.up_taps, in_cutoff, in_half_width * 2, tmp_sampling_rate)

        # Design downsampling filter.
        self.down_factor = int(np.rint(tmp_sampling_rate / out_sampling_rate))
        self.down_taps = filter_size * self.down_factor if self.down_factor > 1 and not self.is_torgb else 1
        self.down_filter = self.design_lowpass_filter(self.down_taps, out_cutoff, out_half_width * 2,
                                                      tmp_sampling_rate)

        # Compute padding.
        pad_total = (self.out_size - 1) * self.down_factor + 1  # Desired output size before downsampling.
        pad_total -= (in_size + self.conv_kernel - 1) * self.up_factor  # Input size after upsampling.
        pad_total += self.up_taps + self.down_taps - 2  # Size reduction caused by the filters.
        pad_lo = (pad_total + self.up_factor) // 2  # Shift sample locations (Appendix C.3).
        pad_hi = pad_total - pad_lo
        self.padding = [int(pad_lo[0]), int(pad_hi[0]), int(pad_lo[1]), int(pad_hi[1])]

    def forward(self, x, w):
        input_gain = self.magnitude_ema.rsqrt()
        styles = self.affine(w)
        if self.is_torgb:
            styles = styles * (1 / np.sqrt(self.in_channels * (self.conv_kernel ** 2)))
        x = modulated_conv2d(x=x, w=self.weight, s=styles, padding=self.conv_kernel - 1,
                             demodulate=(not self.is_torgb), input_gain=input_gain)
        gain = 1 if self.is_torgb else np.sqrt(2)
        slope = 1 if self.is_torgb else 0.2
        return filtered_lrelu_ref(x, self.up_filter, self.down_filter, self.bias.to(x.dtype), self.up_factor,
                                  self.down_factor, self.padding, gain, slope, self.conv_clamp)

    @staticmethod
    def design_lowpass_filter(numtaps, cutoff, width, fs):
        """The separable Kaiser low-pass filter ([numtaps] taps), or None (identity) for one tap."""
        if numtaps == 1:
            return None
        return torch.as_tensor(firwin_kaiser(numtaps, cutoff, width, fs), dtype=torch.float32)


class SynthesisNetwork(torch.nn.Module):
    """networks_stylegan3.py's SynthesisNetwork, running its layers [first, last) only: from layer 0 the Fourier
    input feeds them; from a later one the feature map x does. The output scale applies when the ToRGB layer runs."""

    def __init__(self, w_dim=512, img_resolution=256, img_channels=3, channel_base=32768, channel_max=512,
                 num_layers=14, num_critical=2, first_cutoff=2, first_stopband=2 ** 2.1, last_stopband_rel=2 ** 0.3,
                 margin_size=10, output_scale=0.25, layers=(0, 15)):
        super().__init__()
        self.num_ws = num_layers + 2
        self.output_scale = output_scale
        self.first, self.last = layers

        # Geometric progression of layer cutoffs and min. stopbands.
        last_cutoff = img_resolution / 2
        last_stopband = last_cutoff * last_stopband_rel
        exponents = np.minimum(np.arange(num_layers + 1) / (num_layers - num_critical), 1)
        cutoffs = first_cutoff * (last_cutoff / first_cutoff) ** exponents
        stopbands = first_stopband * (last_stopband / first_stopband) ** exponents

        # Compute remaining layer parameters.
        sampling_rates = np.exp2(np.ceil(np.log2(np.minimum(stopbands * 2, img_resolution))))
        half_widths = np.maximum(stopbands, sampling_rates / 2) - cutoffs
        sizes = sampling_rates + margin_size * 2
        sizes[-2:] = img_resolution
        channels = np.rint(np.minimum((channel_base / 2) / cutoffs, channel_max))
        channels[-1] = img_channels
        self.in_shape = [1, int(channels[max(self.first - 1, 0)]), int(sizes[max(self.first - 1, 0)])]

        self.input = SynthesisInput(w_dim=w_dim, channels=int(channels[0]), size=int(sizes[0]),
                                    sampling_rate=sampling_rates[0], bandwidth=cutoffs[0])
        self.layer_names = []
        for idx in range(num_layers + 1):
            prev = max(idx - 1, 0)
            layer = SynthesisLayer(
                w_dim=w_dim, is_torgb=(idx == num_layers),
                in_channels=int(channels[prev]), out_channels=int(channels[idx]),
                in_size=int(sizes[prev]), out_size=int(sizes[idx]),
                in_sampling_rate=int(sampling_rates[prev]), out_sampling_rate=int(sampling_rates[idx]),
                in_cutoff=cutoffs[prev], out_cutoff=cutoffs[idx],
                in_half_width=half_widths[prev], out_half_width=half_widths[idx])
            name = f"L{idx}_{layer.out_size[0]}_{int(channels[idx])}"
            setattr(self, name, layer)
            self.layer_names.append(name)

    def forward(self, ws, x=None):
        ws = ws.to(torch.float32).unbind(dim=1)
        if self.first == 0:
            x = self.input(ws[0])
        for idx in range(self.first, self.last):
            x = getattr(self, self.layer_names[idx])(x, ws[idx + 1])
        if self.last == len(self.layer_names) and self.output_scale != 1:
            x = x * self.output_scale
        return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--resolution", type=int, default=256, choices=[256, 512, 1024])
    parser.add_argument("--channel-base", type=int, default=32768, help="train.py's --cbase")
    parser.add_argument("--channel-max", type=int, default=512, help="train.py's --cmax")
    parser.add_argument("--w-dim", type=int, default=512)
    parser.add_argument("--layers", default="0:15", help="A:B, export layers A to B-1 (0:15 is the whole network)")
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    first, last = (int(v) for v in args.layers.split(":"))
    if not 0 <= first < last <= 15:
        parser.error("--layers A:B needs 0 <= A < B <= 15")
    torch.manual_seed(0)
    net = SynthesisNetwork(w_dim=args.w_dim, img_resolution=args.resolution, channel_base=args.channel_base,
                           channel_max=args.channel_max, layers=(first, last)).eval()
    ws = torch.randn(1, net.num_ws, args.w_dim)
    inputs, input_names = (ws,), ["ws"]
    if first > 0:
        c, size = net.in_shape[1], net.in_shape[2]
        inputs, input_names = (ws, torch.randn(1, c, size, size)), ["ws", "x"]
    with torch.no_grad():
        torch.onnx.export(net, inputs, args.out, opset_version=args.opset, input_names=input_names,
                          output_names=["img" if last == 15 else "y"])
    out = args.out[:-5] if args.out.endswith(".onnx") else args.out
    print(f"wrote {args.out}; next: dwdeconv-rewrite {args.out} -o {out}.xnn.onnx --target xnnpack --verify")


if __name__ == "__main__":
    main()
