"""Small reference models built from code, for tests, demos and benchmarks.

Each model seeds its own weights (`torch.manual_seed`), so two instances are identical
and no download is needed. `example_inputs(batch)` gives inputs of the shapes the model
expects; the models are returned in eval mode, as an inference compiler sees them.
"""

# No `from __future__ import annotations`: torch.jit.script reads these annotations at run time.

import itertools
from collections.abc import Sequence

import torch
from torch import nn


class MLP(nn.Module):
    """Linear layers with ReLU between them: [batch, sizes[0]] -> [batch, sizes[-1]]."""

    def __init__(self, sizes: tuple[int, ...] = (64, 128, 128, 10), seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.layers = nn.Sequential(*layers)
        self.in_features = sizes[0]
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)

    def example_inputs(self, batch: int = 2) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randn(batch, self.in_features),)


class ConvBNReLU(nn.Sequential):
    """A bias-free convolution, batch norm and ReLU: the unit of most CNNs."""

    def __init__(self, n_in: int, n_out: int, stride: int = 1, groups: int = 1) -> None:
        super().__init__(
            nn.Conv2d(n_in, n_out, 3, stride=stride, padding=1, groups=groups, bias=False),
            nn.BatchNorm2d(n_out),
            nn.ReLU(),
        )


class SmallCNN(nn.Module):
    """Conv-BN-ReLU blocks, a depthwise block, max and average pooling and a linear head.

    Input [batch, 3, 32, 32]; output logits [batch, classes].
    """

    def __init__(self, classes: int = 10, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.stem = ConvBNReLU(3, 16)
        self.pool = nn.MaxPool2d(2)
        self.block1 = ConvBNReLU(16, 32, stride=2)
        self.depthwise = ConvBNReLU(32, 32, groups=32)
        self.pointwise = nn.Conv2d(32, 64, 1)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(64, classes)
        # Non-trivial batch-norm statistics, so folding them is visible in numerics.
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean = torch.rand(module.num_features) - 0.5
                module.running_var = torch.rand(module.num_features) + 0.5
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.stem(x))
        x = self.depthwise(self.block1(x))
        x = torch.relu(self.pointwise(x))
        return self.head(torch.flatten(self.avgpool(x), 1))

    def example_inputs(self, batch: int = 2) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randn(batch, 3, 32, 32),)


class ExplicitSelfAttention(nn.Module):
    """Multi-head self-attention written out as timm's ViT and nanoGPT write it where no fused kernel is used:
    softmax(q k^T / sqrt(d_head)) v, the probabilities [batch, heads, seq, seq] a tensor of their own that training
    keeps for the backward pass. [batch, seq, d_model] -> [batch, seq, d_model]."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.heads = heads
        self.scale = (d_model // heads) ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        qkv = self.qkv(x).reshape(batch, seq, 3, self.heads, d_model // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        probabilities = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((probabilities @ v).transpose(1, 2).reshape(batch, seq, d_model))


class TransformerBlock(nn.Module):
    """A pre-norm encoder block: self-attention and a GELU MLP, each with a residual.

    Input and output [batch, seq, d_model]. The attention is torch's `nn.MultiheadAttention` (one fused kernel),
    or with `explicit_attention` the written-out `ExplicitSelfAttention`.
    """

    def __init__(
        self, d_model: int = 64, heads: int = 4, seq: int = 16, seed: int = 0, explicit_attention: bool = False
    ) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = (
            ExplicitSelfAttention(d_model, heads)
            if explicit_attention
            else nn.MultiheadAttention(d_model, heads, batch_first=True)
        )
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.d_model = d_model
        self.seq = seq
        self.explicit_attention = explicit_attention
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + (self.attn(h) if self.explicit_attention else self.attn(h, h, h, need_weights=False)[0])
        return x + self.mlp(self.norm2(x))

    def example_inputs(self, batch: int = 2) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randn(batch, self.seq, self.d_model),)


def _relu_mlp(widths: Sequence[int], *, last_relu: bool) -> nn.Sequential:
    """Linear layers through `widths`, a ReLU after each (but the last, unless `last_relu`)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(n_in, n_out))
        if last_relu or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """A DLRM-style recommender.

    Sum-pooled embedding bags (one per sparse feature) and a bottom MLP over the dense
    features (hidden widths `bottom`, then `dim`); their pairwise dot products (upper triangle)
    with the bottom output feed a top MLP (hidden widths `top`) ending in a sigmoid. Inputs:
    dense [batch, dense_features], indices [tables, batch * pooling] (int64), offsets
    [tables, batch] (int64); output [batch, 1]. `rows` is every table's row count, or one per
    table (tables of mixed sizes, as real recommenders have).
    """

    triu: torch.Tensor
    """Row and column indices of the interaction matrix's upper triangle, [2, pairs]."""

    def __init__(
        self,
        dense_features: int = 13,
        tables: int = 4,
        rows: int | Sequence[int] = 100,
        dim: int = 16,
        pooling: int = 3,
        seed: int = 0,
        bottom: Sequence[int] = (64,),
        top: Sequence[int] = (64,),
    ) -> None:
        super().__init__()
        torch.manual_seed(seed)
        table_rows = [rows] * tables if isinstance(rows, int) else list(rows)
        if len(table_rows) != tables:
            raise ValueError(f"DLRM: {tables} tables but {len(table_rows)} row counts")
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum") for n in table_rows)
        self.bottom = _relu_mlp((dense_features, *bottom, dim), last_relu=True)
        n = tables + 1
        pairs = n * (n - 1) // 2
        self.top = nn.Sequential(*_relu_mlp((dim + pairs, *top, 1), last_relu=False), nn.Sigmoid())
        # Not part of the state dict: exporters must still see it as a constant.
        self.register_buffer("triu", torch.triu_indices(n, n, offset=1), persistent=False)
        self.dense_features = dense_features
        self.table_rows = table_rows
        self.pooling = pooling
        self.eval()

    def forward(self, dense: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        features = [x]  # written so that torch.jit.script accepts it too
        for i, bag in enumerate(self.embeddings):
            features.append(bag(indices[i], offsets[i]))
        stacked = torch.stack(features, dim=1)
        dots = torch.bmm(stacked, stacked.transpose(1, 2))
        interactions = dots[:, self.triu[0], self.triu[1]]
        return self.top(torch.cat([x, interactions], dim=1))

    def example_inputs(self, batch: int = 2, zipf: float = 0.0, seed: int = 1) -> tuple[torch.Tensor, ...]:
        """Ids uniform over each table's rows, or with `zipf` > 0 drawn from a power law (the r-th hottest row's
        weight 1 / (r + 1) ** zipf): the hot rows of real click logs. Which rows are hot is the table's, the same in
        every batch (`seed` draws the ids, not the order), as a click log's popular items are the same on every
        rank. A shuffle per batch moved them: two ranks' ids into 20k-500k rows touched 11-14% more distinct rows,
        and a step's hot rows were not the last step's."""
        generator = torch.Generator().manual_seed(seed)
        dense = torch.randn(batch, self.dense_features, generator=generator)
        ids = [self._ids(n, batch * self.pooling, zipf, generator, i) for i, n in enumerate(self.table_rows)]
        offsets = (torch.arange(batch) * self.pooling).repeat(len(ids), 1)
        return dense, torch.stack(ids), offsets

    @staticmethod
    def _ids(rows: int, count: int, zipf: float, generator: torch.Generator, table: int) -> torch.Tensor:
        if zipf <= 0:
            return torch.randint(0, rows, (count,), generator=generator)
        weights = torch.arange(1, rows + 1, dtype=torch.float64) ** -zipf
        ranks = torch.multinomial(weights, count, replacement=True, generator=generator)
        return torch.randperm(rows, generator=torch.Generator().manual_seed(table))[ranks]


def _conv_bn(
    n_in: int, n_out: int, kernel: int, stride: int, groups: int, act: type[nn.Module] | None
) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(n_in, n_out, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(n_out),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def _randomize_batch_norms(model: nn.Module) -> None:
    """Give every batch norm non-trivial statistics, as a trained network has, so that folding them is tested."""
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            nn.init.uniform_(module.weight, 0.5, 1.5)
            nn.init.uniform_(module.bias, -0.1, 0.1)
            mean, variance = module.running_mean, module.running_var
            assert mean is not None  # tracked statistics: BatchNorm2d's default
            assert variance is not None
            nn.init.uniform_(mean, -0.1, 0.1)
            nn.init.uniform_(variance, 0.5, 1.5)


class InvertedResidual(nn.Module):
    """MobileNet-V2's block (and EfficientNet's MBConv with `excite`): 1x1 expand, depthwise, [squeeze-excite,]
    1x1 project, with a residual where the shape allows."""

    def __init__(
        self, n_in: int, n_out: int, stride: int, expand: int, kernel: int = 3, act: type[nn.Module] = nn.ReLU6,
        excite: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        hidden = n_in * expand
        layers: list[nn.Module] = [_conv_bn(n_in, hidden, 1, 1, 1, act)] if expand != 1 else []
        layers.append(_conv_bn(hidden, hidden, kernel, stride, hidden, act))
        self.expand_depthwise = nn.Sequential(*layers)
        self.excite: nn.Module | None = None
        if excite:
            squeezed = max(1, n_in // 4)
            self.excite = nn.Sequential(
                nn.AdaptiveAvgPool2d(1), nn.Conv2d(hidden, squeezed, 1), act(), nn.Conv2d(squeezed, hidden, 1),
                nn.Sigmoid(),
            )  # fmt: skip
        self.project = _conv_bn(hidden, n_out, 1, 1, 1, None)
        self.residual = stride == 1 and n_in == n_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.expand_depthwise(x)
        if self.excite is not None:
            y = y * self.excite(y)
        y = self.project(y)
        return x + y if self.residual else y


class _InvertedResidualNet(nn.Module):
    """A stem, stages of `InvertedResidual` blocks (`SETTINGS`), a 1x1 conv to 1280 channels, global average pooling
    and a linear classifier: [batch, 3, 224, 224] -> logits [batch, classes]."""

    SETTINGS: tuple[tuple[int, int, int, int, int], ...] = ()
    """(expand, channels, repeats, first stride, kernel) of each stage."""
    ACTIVATION: type[nn.Module] = nn.ReLU6
    EXCITE = False

    def __init__(self, classes: int = 1000, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        act = self.ACTIVATION
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2, 1, act)]
        channels = 32
        for expand, n_out, repeats, stride, kernel in self.SETTINGS:
            for i in range(repeats):
                first_stride = stride if i == 0 else 1
                layers.append(InvertedResidual(channels, n_out, first_stride, expand, kernel, act, self.EXCITE))
                channels = n_out
        layers.append(_conv_bn(channels, 1280, 1, 1, 1, act))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)
        _randomize_batch_norms(self)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean((2, 3)))

    def example_inputs(self, batch: int = 1) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randn(batch, 3, 224, 224),)


class MobileNetV2(_InvertedResidualNet):
    """MobileNet-V2 (Sandler et al., 2018) at width 1.0, ReLU6."""

    SETTINGS = (
        (1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 3, 2, 3), (6, 64, 4, 2, 3), (6, 96, 3, 1, 3), (6, 160, 3, 2, 3),
        (6, 320, 1, 1, 3),
    )  # fmt: skip


class EfficientNetB0(_InvertedResidualNet):
    """An EfficientNet-B0-style network (Tan and Le, 2019): MBConv blocks with squeeze-excite and SiLU, no
    stochastic depth."""

    SETTINGS = (
        (1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5), (6, 192, 4, 2, 5),
        (6, 320, 1, 1, 3),
    )  # fmt: skip
    ACTIVATION = nn.SiLU
    EXCITE = True


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 conv-BN pairs and a shortcut (a strided 1x1 conv-BN where the shape changes)."""

    def __init__(self, n_in: int, n_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(n_in, n_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(n_out)
        self.conv2 = nn.Conv2d(n_out, n_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(n_out)
        self.down = nn.Identity()
        if stride != 1 or n_in != n_out:
            self.down = nn.Sequential(nn.Conv2d(n_in, n_out, 1, stride, bias=False), nn.BatchNorm2d(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + self.down(x))


class ResNet18(nn.Module):
    """ResNet-18 (He et al., 2016): a 7x7 stem, max pooling, four stages of two basic blocks, average pooling and a
    linear head; `width` is the first stage's channels (64 in the paper)."""

    def __init__(self, width: int = 64, classes: int = 1000, image: int = 224, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        widths = [width, 2 * width, 4 * width, 8 * width]
        blocks: list[nn.Module] = []
        for stage, n_out in enumerate(widths):
            blocks.append(BasicBlock(widths[max(stage - 1, 0)], n_out, 1 if stage == 0 else 2))
            blocks.append(BasicBlock(n_out, n_out, 1))
        self.stages = nn.Sequential(*blocks)
        self.fc = nn.Linear(widths[-1], classes)
        self.image = image
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.stages(self.stem(x)), 1), 1))

    def example_inputs(self, batch: int = 1) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randn(batch, 3, self.image, self.image),)


class LSTMClassifier(nn.Module):
    """A stacked LSTM over a sequence, its last step's output through a linear head: [batch, steps, features] ->
    [batch, classes]."""

    def __init__(self, features: int = 32, hidden: int = 64, layers: int = 2, classes: int = 10, steps: int = 16,
                 seed: int = 0) -> None:  # fmt: skip
        super().__init__()
        torch.manual_seed(seed)
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)
        self.features, self.steps = features, steps
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0][:, -1])

    def example_inputs(self, batch: int = 2) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randn(batch, self.steps, self.features),)


class TransformerEncoder(nn.Module):
    """`layers` pre-norm encoder blocks (`TransformerBlock`, their attention explicit or fused) and a final layer
    norm: [batch, seq, d_model] -> [batch, seq, d_model]."""

    def __init__(
        self,
        layers: int = 4,
        d_model: int = 64,
        heads: int = 4,
        seq: int = 16,
        seed: int = 0,
        explicit_attention: bool = False,
    ) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            *(TransformerBlock(d_model, heads, seq, seed + i, explicit_attention) for i in range(layers))
        )
        self.norm = nn.LayerNorm(d_model)
        self.d_model, self.seq = d_model, seq
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(x))

    def example_inputs(self, batch: int = 2) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randn(batch, self.seq, self.d_model),)


class LSTMLanguageModel(nn.Module):
    """A word-level language model in the style of Zaremba et al. (2014): embedding, a stacked LSTM, and a decoder
    over the vocabulary at every step: token ids [batch, steps] -> logits [batch * steps, vocab] (flattened, for a
    cross-entropy against the next tokens)."""

    def __init__(self, vocab: int = 1000, hidden: int = 128, layers: int = 2, steps: int = 20, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embedding = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)
        self.vocab, self.steps = vocab, steps
        self.eval()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.lstm(self.embedding(tokens))[0]).reshape(-1, self.vocab)

    def example_inputs(self, batch: int = 2) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randint(0, self.vocab, (batch, self.steps)),)


class BertEncoder(nn.Module):
    """A BERT-style encoder over token ids: token and position embeddings (positions `arange(seq)`, so the sequence
    length may vary up to `max_len`), a layer norm and `layers` post-norm encoder layers with GELU MLPs (torch's
    `nn.TransformerEncoderLayer`). [batch, seq] int64 ids -> [batch, seq, d_model]."""

    def __init__(
        self, vocab: int = 1000, d_model: int = 64, heads: int = 4, layers: int = 2, max_len: int = 128, seed: int = 0
    ) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.tokens, self.positions = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.norm = nn.LayerNorm(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, heads, 4 * d_model, dropout=0.0, activation="gelu", batch_first=True
        )
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.vocab, self.max_len = vocab, max_len
        self.eval()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        return self.layers(self.norm(self.tokens(ids) + self.positions(positions)))

    def example_inputs(self, batch: int = 2, seq: int = 16) -> tuple[torch.Tensor, ...]:
        torch.manual_seed(1)
        return (torch.randint(0, self.vocab, (batch, seq)),)
