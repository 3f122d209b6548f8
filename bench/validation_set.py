"""The validation set of gnomon's cost model: small models it is judged on and never refined against.

The cost model is tuned on bench/predict_accuracy.py's cases (the onnx package's light CNNs and gnomon.models'
TransformerBlock, DLRM and MLP). A model that predicts those well may still fail on shapes and op mixes it never
saw, so these models come from other families: depthwise-heavy CNNs (MobileNet-V2 and -V3), channels-last
ConvNeXt blocks with permutes, vision transformers, encoder transformers with padding masks, decoder transformers
with causal masks and learned or rotary positions, UNet-style encoder-decoders, recurrent cells unrolled over time,
MLP-mixers and DLRM variants; several shapes each, at two batch sizes.

Nothing here may be used to fit, calibrate or tune the cost model, nor to choose between its variants while it is
being refined: only to report how well a finished model predicts. Each model is built from code with seeded
weights, in eval mode; `example_inputs(model, batch)` gives seeded inputs at a batch size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class ValidationModel:
    """One model of the set: how to build it, its inputs at a batch size, and the two batch sizes it runs at."""

    family: str
    build: Callable[[], nn.Module]
    example_inputs: Callable[[nn.Module, int], Inputs]
    batches: tuple[int, int]


def _seeded(cls: Callable[..., nn.Module], **kwargs: object) -> Callable[[], nn.Module]:
    """A builder that seeds torch's generator, builds `cls(**kwargs)`, randomizes batch-norm statistics and
    returns the model in eval mode."""

    def build() -> nn.Module:
        torch.manual_seed(0)
        model = cls(**kwargs)
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean = torch.rand(module.num_features) - 0.5
                module.running_var = torch.rand(module.num_features) + 0.5
        return model.eval()

    return build


def _randn(*shape: int) -> Callable[[nn.Module, int], Inputs]:
    """Inputs of one float tensor [batch, *shape]."""

    def inputs(model: nn.Module, batch: int) -> Inputs:
        torch.manual_seed(1)
        return (torch.randn(batch, *shape),)

    return inputs


# Depthwise-heavy CNNs


class ConvBN(nn.Sequential):
    """A bias-free convolution and batch norm, with an optional activation."""

    def __init__(self, n_in: int, n_out: int, kernel: int, stride: int = 1, groups: int = 1, act: str = "") -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(n_in, n_out, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(n_out),
        ]
        activations: dict[str, Callable[[], nn.Module]] = {"relu6": nn.ReLU6, "relu": nn.ReLU, "hswish": nn.Hardswish}
        if act:
            layers.append(activations[act]())
        super().__init__(*layers)


class InvertedResidual(nn.Module):
    """MobileNet-V2's block: 1x1 expansion, depthwise 3x3, linear 1x1 projection, residual when shapes match."""

    def __init__(self, n_in: int, n_out: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = n_in * expand
        self.body = nn.Sequential(
            ConvBN(n_in, hidden, 1, act="relu6"),
            ConvBN(hidden, hidden, 3, stride, groups=hidden, act="relu6"),
            ConvBN(hidden, n_out, 1),
        )
        self.residual = stride == 1 and n_in == n_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """A stem, a stack of inverted residual blocks (`stages` of (channels, blocks, first stride)), a 1x1 head
    conv, global pooling and a classifier."""

    def __init__(self, width: int = 16, expand: int = 6, depth: int = 2, classes: int = 10) -> None:
        super().__init__()
        stages = [(width, 1, 1), (width * 3 // 2, depth, 2), (width * 2, depth, 2), (width * 4, depth, 2)]
        layers: list[nn.Module] = [ConvBN(3, width, 3, 2, act="relu6")]
        n_in = width
        for n_out, blocks, stride in stages:
            for i in range(blocks):
                layers.append(InvertedResidual(n_in, n_out, stride if i == 0 else 1, expand))
                n_in = n_out
        layers.append(ConvBN(n_in, n_in * 4, 1, act="relu6"))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(n_in * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean((2, 3)))


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation: global average, 1x1 reduce, ReLU, 1x1 expand, hard sigmoid, scale."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        squeezed = max(8, channels // 4)
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.expand(F.relu(self.reduce(s))))


class MobileNetV3Block(nn.Module):
    """MobileNet-V3's block: expansion, depthwise k x k, optional squeeze-excite, projection; hardswish or ReLU."""

    def __init__(self, n_in: int, hidden: int, n_out: int, kernel: int, stride: int, se: bool, act: str) -> None:
        super().__init__()
        self.expand = ConvBN(n_in, hidden, 1, act=act)
        self.depthwise = ConvBN(hidden, hidden, kernel, stride, groups=hidden, act=act)
        self.se = SqueezeExcite(hidden) if se else nn.Identity()
        self.project = ConvBN(hidden, n_out, 1)
        self.residual = stride == 1 and n_in == n_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.se(self.depthwise(self.expand(x))))
        return x + y if self.residual else y


class MobileNetV3(nn.Module):
    """A MobileNet-V3-small-like stack: hardswish stem, blocks mixing 3x3 and 5x5 depthwise convs with and without
    squeeze-excite, a hardswish head with a hidden linear layer."""

    def __init__(self, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        w = width
        self.stem = ConvBN(3, w, 3, 2, act="hswish")
        self.blocks = nn.Sequential(
            MobileNetV3Block(w, w, w, 3, 2, True, "relu"),
            MobileNetV3Block(w, w * 4, w * 3 // 2, 3, 2, False, "relu"),
            MobileNetV3Block(w * 3 // 2, w * 6, w * 3 // 2, 3, 1, False, "relu"),
            MobileNetV3Block(w * 3 // 2, w * 6, w * 5 // 2, 5, 2, True, "hswish"),
            MobileNetV3Block(w * 5 // 2, w * 10, w * 5 // 2, 5, 1, True, "hswish"),
        )
        self.head = ConvBN(w * 5 // 2, w * 12, 1, act="hswish")
        self.classifier = nn.Sequential(nn.Linear(w * 12, w * 32), nn.Hardswish(), nn.Linear(w * 32, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# Channels-last blocks


class ConvNeXtBlock(nn.Module):
    """Depthwise 7x7 conv, permute to channels-last, layer norm, GELU MLP, layer scale, permute back, residual."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.gamma * self.fc2(F.gelu(self.fc1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ChannelsFirstLayerNorm(nn.Module):
    """Layer norm over the channels of an NCHW tensor, written as a permute around nn.LayerNorm."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """A patchify stem (4x4 stride 4), stages of ConvNeXt blocks with 2x2 stride-2 downsampling between them, and a
    normalized pooled head."""

    def __init__(self, width: int = 32, stages: int = 2, depth: int = 1, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, width, 4, stride=4), ChannelsFirstLayerNorm(width)]
        dim = width
        for stage in range(stages):
            if stage > 0:
                layers += [ChannelsFirstLayerNorm(dim), nn.Conv2d(dim, dim * 2, 2, stride=2)]
                dim *= 2
            layers += [ConvNeXtBlock(dim) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.features(x).mean((2, 3))))


# Transformers


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotary embedding's rotation: (x1, x2) -> (-x2, x1) over the two halves of the last dimension."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    """Multi-head self-attention with separate q/k/v projections, written with matmul and softmax, or with
    F.scaled_dot_product_attention (`sdpa`). `forward` takes an additive mask broadcastable to
    [batch, heads, seq, seq], and optionally rotary cos/sin tables [seq, head_dim]."""

    def __init__(self, dim: int, heads: int, sdpa: bool = False) -> None:
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.heads = heads
        self.sdpa = sdpa

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, rotary: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = (p(x).reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        if rotary is not None:
            cos, sin = rotary
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
            if mask is not None:
                scores = scores + mask
            y = torch.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class EncoderLayer(nn.Module):
    """A transformer layer: pre-norm or post-norm attention and a GELU or ReLU MLP, each with a residual."""

    def __init__(self, dim: int, heads: int, mlp: int, pre_norm: bool = True, sdpa: bool = False, act: str = "gelu"):
        super().__init__()
        self.attn = Attention(dim, heads, sdpa)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU() if act == "gelu" else nn.ReLU(), nn.Linear(mlp, dim))
        self.pre_norm = pre_norm

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, rotary: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attn(self.norm1(x), mask, rotary)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask, rotary))
        return self.norm2(x + self.mlp(x))


class ViT(nn.Module):
    """A vision transformer: patch-embedding conv, class token, learned positions, pre-norm encoder layers, and a
    classifier on the class token."""

    def __init__(
        self, image: int = 32, patch: int = 4, dim: int = 64, depth: int = 2, heads: int = 4, classes: int = 10
    ) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, 2 * dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x[:, 0]))


class MaskedEncoder(nn.Module):
    """A BERT-like encoder over token ids with a padding mask: token and learned position embeddings, post-norm
    layers whose attention ignores padded keys, mean pooling over the unpadded tokens, a classifier.

    Inputs: ids [batch, seq] (int64), mask [batch, seq] (1.0 for a token, 0.0 for padding)."""

    def __init__(
        self, vocab: int = 500, seq: int = 32, dim: int = 64, depth: int = 2, heads: int = 4, sdpa: bool = False
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, 4 * dim, pre_norm=False, sdpa=sdpa) for _ in range(depth))
        self.head = nn.Linear(dim, 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids) + self.pos
        additive = ((1.0 - mask) * -1e4)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, additive)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdim=True)
        return self.head(pooled)


def encoder_inputs(model: nn.Module, batch: int) -> Inputs:
    """Token ids and a padding mask whose rows keep between half and all of the model's tokens."""
    assert isinstance(model, MaskedEncoder)
    vocab, seq = model.tokens.num_embeddings, model.pos.shape[1]
    torch.manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq))
    lengths = torch.randint(seq // 2, seq + 1, (batch, 1))
    return ids, (torch.arange(seq)[None, :] < lengths).float()


class Decoder(nn.Module):
    """A GPT-like decoder over token ids: token embeddings, learned positions or rotary embeddings, pre-norm layers
    with a causal mask, a final norm and a language-model head. Input ids [batch, seq] (int64); output logits
    [batch, seq, vocab]."""

    causal: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor

    def __init__(
        self,
        vocab: int = 256,
        seq: int = 32,
        dim: int = 64,
        depth: int = 2,
        heads: int = 4,
        rotary: bool = False,
        sdpa: bool = False,
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq, dim) if rotary else torch.randn(1, seq, dim) * 0.02)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, 4 * dim, sdpa=sdpa) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.rotary = rotary
        self.register_buffer("causal", torch.triu(torch.full((seq, seq), -1e9), diagonal=1), persistent=False)
        head_dim = dim // heads
        freqs = 1.0 / 10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(seq).float(), freqs).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids)
        rotary = (self.cos, self.sin) if self.rotary else None
        if not self.rotary:
            x = x + self.pos
        for layer in self.layers:
            x = layer(x, self.causal, rotary)
        return self.head(self.norm(x))


def decoder_inputs(model: nn.Module, batch: int) -> Inputs:
    """Token ids [batch, seq] (int64)."""
    assert isinstance(model, Decoder)
    torch.manual_seed(1)
    return (torch.randint(0, model.tokens.num_embeddings, (batch, model.pos.shape[1])),)


# Encoder-decoders


class DoubleConv(nn.Sequential):
    """Two 3x3 conv, batch norm, ReLU units."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__(ConvBN(n_in, n_out, 3, act="relu"), ConvBN(n_out, n_out, 3, act="relu"))


class UNet(nn.Module):
    """A UNet: `levels` stride-2 conv downsamplings, transposed-conv upsamplings whose outputs are concatenated
    with the skip connections, and a 1x1 conv to `classes` channels at full resolution."""

    def __init__(self, n_in: int = 3, width: int = 8, levels: int = 2, classes: int = 2) -> None:
        super().__init__()
        widths = [width * 2**i for i in range(levels + 1)]
        self.stem = DoubleConv(n_in, widths[0])
        self.down = nn.ModuleList(
            nn.Sequential(
                ConvBN(widths[i], widths[i + 1], 3, stride=2, act="relu"), DoubleConv(widths[i + 1], widths[i + 1])
            )
            for i in range(levels)
        )
        self.up = nn.ModuleList(
            nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2) for i in reversed(range(levels))
        )
        self.merge = nn.ModuleList(DoubleConv(2 * widths[i], widths[i]) for i in reversed(range(levels)))
        self.out = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = [self.stem(x)]
        for down in self.down:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up, merge in zip(self.up, self.merge, strict=True):
            x = merge(torch.cat([up(x), skips.pop()], dim=1))
        return self.out(x)


# Recurrent cells


class GRU(nn.Module):
    """A GRU cell written with Linear layers, sigmoid and tanh, unrolled over the sequence; `layers` stacked cells
    and a linear head on every step. Input [batch, steps, features]; output [batch, steps, classes]."""

    def __init__(self, features: int = 32, hidden: int = 64, layers: int = 1, classes: int = 10) -> None:
        super().__init__()
        sizes = [features] + [hidden] * layers
        self.input = nn.ModuleList(nn.Linear(sizes[i], 3 * hidden) for i in range(layers))
        self.state = nn.ModuleList(nn.Linear(hidden, 3 * hidden) for _ in range(layers))
        self.head = nn.Linear(hidden, classes)
        self.hidden = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for w_x, w_h in zip(self.input, self.state, strict=True):
            gx = w_x(x)
            h = torch.zeros(x.shape[0], self.hidden)
            steps = []
            for t in range(x.shape[1]):
                rx, zx, nx = gx[:, t].chunk(3, dim=1)
                rh, zh, nh = w_h(h).chunk(3, dim=1)
                r = torch.sigmoid(rx + rh)
                z = torch.sigmoid(zx + zh)
                n = torch.tanh(nx + r * nh)
                h = (1 - z) * n + z * h
                steps.append(h)
            x = torch.stack(steps, dim=1)
        return self.head(x)


class LSTM(nn.Module):
    """An LSTM cell written with one Linear over [input, state], sigmoid and tanh, unrolled over the sequence; a
    linear head on the last state. Input [batch, steps, features]; output [batch, classes]."""

    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.gates = nn.Linear(features + hidden, 4 * hidden)
        self.head = nn.Linear(hidden, classes)
        self.hidden = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], self.hidden)
        c = torch.zeros(x.shape[0], self.hidden)
        for t in range(x.shape[1]):
            i, f, g, o = self.gates(torch.cat([x[:, t], h], dim=1)).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return self.head(h)


# MLP-mixers


class MixerLayer(nn.Module):
    """Token mixing (an MLP across patches, through a transpose) then channel mixing, each pre-norm with a residual."""

    def __init__(self, patches: int, dim: int, token_mlp: int, channel_mlp: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.tokens = nn.Sequential(nn.Linear(patches, token_mlp), nn.GELU(), nn.Linear(token_mlp, patches))
        self.norm2 = nn.LayerNorm(dim)
        self.channels = nn.Sequential(nn.Linear(dim, channel_mlp), nn.GELU(), nn.Linear(channel_mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channels(self.norm2(x))


class Mixer(nn.Module):
    """An MLP-mixer: patch-embedding conv, mixer layers, a norm, mean over patches and a classifier."""

    def __init__(self, image: int = 32, patch: int = 4, dim: int = 64, depth: int = 2, classes: int = 10) -> None:
        super().__init__()
        patches = (image // patch) ** 2
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.layers = nn.Sequential(*(MixerLayer(patches, dim, patches * 2, dim * 4) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.embed(x).flatten(2).transpose(1, 2))
        return self.head(self.norm(x).mean(1))


# Recommenders


class DLRMVariant(nn.Module):
    """A DLRM-style recommender with tables of different sizes: embedding bags (sum or mean) and a bottom MLP; a
    dot interaction (upper triangle of the pairwise dot products) or a concatenation; a top MLP and a sigmoid.

    Inputs: dense [batch, dense] and, per table, indices [batch * pooling] and offsets [batch] (int64)."""

    triu: torch.Tensor

    def __init__(
        self,
        dense: int = 13,
        rows: tuple[int, ...] = (100, 1000),
        dim: int = 16,
        pooling: int = 3,
        mode: str = "sum",
        interaction: str = "dot",
    ) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(r, dim, mode=mode) for r in rows)
        self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        n = len(rows) + 1
        top_in = dim + n * (n - 1) // 2 if interaction == "dot" else dim * n
        self.top = nn.Sequential(nn.Linear(top_in, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
        self.register_buffer("triu", torch.triu_indices(n, n, offset=1), persistent=False)
        self.interaction = interaction
        self.dense = dense
        self.pooling = pooling

    def forward(self, dense: torch.Tensor, *sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        features = [x]
        for i, bag in enumerate(self.embeddings):
            features.append(bag(sparse[2 * i], sparse[2 * i + 1]))
        if self.interaction == "dot":
            stacked = torch.stack(features, dim=1)
            dots = torch.bmm(stacked, stacked.transpose(1, 2))
            top_in = torch.cat([x, dots[:, self.triu[0], self.triu[1]]], dim=1)
        else:
            top_in = torch.cat(features, dim=1)
        return torch.sigmoid(self.top(top_in))


def dlrm_inputs(model: nn.Module, batch: int) -> Inputs:
    """Dense features, then each table's indices and offsets for `pooling` lookups a sample."""
    assert isinstance(model, DLRMVariant)
    torch.manual_seed(1)
    tensors = [torch.randn(batch, model.dense)]
    for bag in model.embeddings:
        assert isinstance(bag, nn.EmbeddingBag)
        indices = torch.randint(0, bag.num_embeddings, (batch * model.pooling,))
        tensors += [indices, torch.arange(batch) * model.pooling]
    return tuple(tensors)


def _model(
    family: str,
    cls: Callable[..., nn.Module],
    inputs: Callable[[nn.Module, int], Inputs],
    batches: tuple[int, int],
    **kwargs: object,
) -> ValidationModel:
    return ValidationModel(family, _seeded(cls, **kwargs), inputs, batches)


_image = partial(_randn, 3)

VALIDATION_SET: dict[str, ValidationModel] = {
    # depthwise-heavy CNNs
    "mobilenet_v2_w8_e4": _model("mobilenet", MobileNetV2, _image(32, 32), (1, 8), width=8, expand=4, depth=1),
    "mobilenet_v2_w16_e6": _model("mobilenet", MobileNetV2, _image(32, 32), (1, 4), width=16, expand=6, depth=2),
    "mobilenet_v2_w16_64px": _model("mobilenet", MobileNetV2, _image(64, 64), (1, 2), width=16, expand=6, depth=1),
    "mobilenet_v3_w8": _model("mobilenet", MobileNetV3, _image(32, 32), (1, 8), width=8),
    "mobilenet_v3_w16": _model("mobilenet", MobileNetV3, _image(32, 32), (1, 4), width=16),
    "mobilenet_v3_w16_64px": _model("mobilenet", MobileNetV3, _image(64, 64), (1, 2), width=16),
    # channels-last blocks
    "convnext_w16_s2": _model("convnext", ConvNeXt, _image(32, 32), (1, 8), width=16, stages=2, depth=1),
    "convnext_w32_s2_d2": _model("convnext", ConvNeXt, _image(32, 32), (1, 4), width=32, stages=2, depth=2),
    "convnext_w24_s3_64px": _model("convnext", ConvNeXt, _image(64, 64), (1, 2), width=24, stages=3, depth=1),
    # vision transformers
    "vit_p4_d64": _model("vit", ViT, _image(32, 32), (1, 4), image=32, patch=4, dim=64, depth=2, heads=4),
    "vit_p8_d96": _model("vit", ViT, _image(32, 32), (1, 8), image=32, patch=8, dim=96, depth=3, heads=6),
    "vit_p8_d128_64px": _model("vit", ViT, _image(64, 64), (1, 4), image=64, patch=8, dim=128, depth=2, heads=8),
    # encoder transformers with padding masks
    "encoder_s32_d64": _model(
        "encoder", MaskedEncoder, encoder_inputs, (1, 8), vocab=500, seq=32, dim=64, depth=2, heads=4
    ),
    "encoder_s64_d128": _model(
        "encoder", MaskedEncoder, encoder_inputs, (1, 4), vocab=1000, seq=64, dim=128, depth=2, heads=8
    ),
    "encoder_s16_d96_sdpa": _model(
        "encoder", MaskedEncoder, encoder_inputs, (2, 16), vocab=300, seq=16, dim=96, depth=3, heads=4, sdpa=True
    ),
    # decoder transformers with causal masks
    "decoder_learned_s32_d64": _model(
        "decoder", Decoder, decoder_inputs, (1, 4), vocab=256, seq=32, dim=64, depth=2, heads=4
    ),
    "decoder_learned_s64_d96_sdpa": _model(
        "decoder", Decoder, decoder_inputs, (1, 4), vocab=512, seq=64, dim=96, depth=2, heads=6, sdpa=True
    ),
    "decoder_rotary_s32_d64": _model(
        "decoder", Decoder, decoder_inputs, (1, 8), vocab=256, seq=32, dim=64, depth=2, heads=4, rotary=True
    ),
    "decoder_rotary_s48_d128": _model(
        "decoder", Decoder, decoder_inputs, (1, 2), vocab=384, seq=48, dim=128, depth=3, heads=8, rotary=True
    ),
    # UNet-style encoder-decoders
    "unet_w8_l2": _model("unet", UNet, _image(32, 32), (1, 4), width=8, levels=2),
    "unet_w16_l3": _model("unet", UNet, _image(32, 32), (1, 2), width=16, levels=3),
    "unet_w8_l3_1ch_64px": _model("unet", UNet, _randn(1, 64, 64), (1, 2), n_in=1, width=8, levels=3, classes=4),
    # recurrent cells
    "gru_h64_t8": _model("recurrent", GRU, _randn(8, 32), (1, 16), features=32, hidden=64),
    "gru_h128_t16_l2": _model("recurrent", GRU, _randn(16, 64), (1, 8), features=64, hidden=128, layers=2),
    "lstm_h64_t8": _model("recurrent", LSTM, _randn(8, 32), (1, 16), features=32, hidden=64),
    "lstm_h256_t12": _model("recurrent", LSTM, _randn(12, 128), (1, 8), features=128, hidden=256),
    # MLP-mixers
    "mixer_p4_d64": _model("mixer", Mixer, _image(32, 32), (1, 8), image=32, patch=4, dim=64, depth=2),
    "mixer_p8_d128": _model("mixer", Mixer, _image(32, 32), (1, 8), image=32, patch=8, dim=128, depth=4),
    "mixer_p8_d96_64px": _model("mixer", Mixer, _image(64, 64), (1, 4), image=64, patch=8, dim=96, depth=3),
    # DLRM variants
    "dlrm_dot_3tables": _model(
        "dlrm",
        DLRMVariant,
        dlrm_inputs,
        (8, 64),
        dense=13,
        rows=(50, 500, 5000),
        dim=16,
        pooling=4,
        mode="sum",
        interaction="dot",
    ),
    "dlrm_dot_6tables_mean": _model(
        "dlrm",
        DLRMVariant,
        dlrm_inputs,
        (4, 128),
        dense=8,
        rows=(10, 100, 1000, 100, 20, 2000),
        dim=32,
        pooling=2,
        mode="mean",
        interaction="dot",
    ),
    "dlrm_cat_4tables": _model(
        "dlrm",
        DLRMVariant,
        dlrm_inputs,
        (16, 256),
        dense=16,
        rows=(1000, 10000, 300, 30),
        dim=8,
        pooling=6,
        mode="sum",
        interaction="cat",
    ),
}
"""The set, grouped by family; each model's name says its distinguishing shape."""
