"""Writes Stable Diffusion v1's first-stage (VAE) decoder as ONNX, with RANDOM weights (seeded): the architecture of
CompVis `ldm/modules/diffusionmodules/model.py`, `Decoder(ch=128, out_ch=3, ch_mult=(1, 2, 4, 4), num_res_blocks=2,
attn_resolutions=[], z_channels=4, resolution=256)`, re-written here so that no checkpoint or ldm checkout is
needed. Its three upsamplers are nearest x2 + 3x3 Conv (`Upsample(with_conv=True)`), which the tool rewrites
(form nearest_conv, dense). The mid block has one single-head self-attention over all pixels (two MatMuls).

    /usr/bin/python3 examples/export_sd_vae_decoder.py sd_vae_decoder_256.onnx --latent 32   # 256x256 image
    /usr/bin/python3 examples/export_sd_vae_decoder.py sd_vae_decoder_512.onnx --latent 64   # 512x512 image

Needs PyTorch (Debian's python3-torch 1.13 exports it at opset 17). About 198 MB of float32 weights: not shipped.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


def norm(c):
    return nn.GroupNorm(num_groups=32, num_channels=c, eps=1e-6, affine=True)


def swish(x):
    return x * torch.sigmoid(x)


class ResnetBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1, self.conv1 = norm(cin), nn.Conv2d(cin, cout, 3, 1, 1)
        self.norm2, self.conv2 = norm(cout), nn.Conv2d(cout, cout, 3, 1, 1)
        self.nin_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.conv1(swish(self.norm1(x)))
        h = self.conv2(swish(self.norm2(h)))
        return (self.nin_shortcut(x) if self.nin_shortcut is not None else x) + h


class AttnBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = norm(c)
        self.q, self.k, self.v, self.proj_out = (nn.Conv2d(c, c, 1) for _ in range(4))

    def forward(self, x):
        h = self.norm(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        b, c, hh, ww = q.shape
        q = q.reshape(b, c, hh * ww).permute(0, 2, 1)  # b, hw, c
        k = k.reshape(b, c, hh * ww)                    # b, c, hw
        w = torch.bmm(q, k) * (int(c) ** -0.5)
        w = F.softmax(w, dim=2)
        v = v.reshape(b, c, hh * ww)
        h = torch.bmm(v, w.permute(0, 2, 1)).reshape(b, c, hh, ww)
        return x + self.proj_out(h)


class Upsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, 1, 1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Decoder(nn.Module):
    def __init__(self, ch=128, out_ch=3, ch_mult=(1, 2, 4, 4), num_res_blocks=2, z_channels=4):
        super().__init__()
        block_in = ch * ch_mult[-1]
        self.conv_in = nn.Conv2d(z_channels, block_in, 3, 1, 1)
        self.mid_block_1 = ResnetBlock(block_in, block_in)
        self.mid_attn = AttnBlock(block_in)
        self.mid_block_2 = ResnetBlock(block_in, block_in)
        self.up = nn.ModuleList()
        for level in reversed(range(len(ch_mult))):
            stage = nn.Module()
            block_out = ch * ch_mult[level]
            blocks = []
            for _ in range(num_res_blocks + 1):
                blocks.append(ResnetBlock(block_in, block_out))
                block_in = block_out
            stage.block = nn.ModuleList(blocks)
            stage.upsample = Upsample(block_in) if level != 0 else None
            self.up.insert(0, stage)
        self.norm_out, self.conv_out = norm(block_in), nn.Conv2d(block_in, out_ch, 3, 1, 1)

    def forward(self, z):
        h = self.mid_block_2(self.mid_attn(self.mid_block_1(self.conv_in(z))))
        for level in reversed(range(len(self.up))):
            for block in self.up[level].block:
                h = block(h)
            if self.up[level].upsample is not None:
                h = self.up[level].upsample(h)
        return self.conv_out(swish(self.norm_out(h)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output")
    parser.add_argument("--latent", type=int, default=32, help="latent height and width (the image is 8x that)")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = Decoder().eval()
    with torch.no_grad():
        for p in model.parameters():  # random, but scaled so activations stay in range through 30 blocks
            if p.dim() == 4:
                nn.init.kaiming_uniform_(p, a=5 ** 0.5)
    z = torch.randn(1, 4, args.latent, args.latent)
    torch.onnx.export(model, (z,), args.output, opset_version=args.opset, input_names=["z"], output_names=["image"],
                      do_constant_folding=True)
    print("wrote", args.output, "(random weights)")


if __name__ == "__main__":
    main()
