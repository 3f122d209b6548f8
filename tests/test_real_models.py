"""Models users bring, through every door torch can produce (a live module, a traced TorchScript file, an ONNX
file), compiled natively and held against torch eager: Hugging Face decoders and encoders built from small
configs (no weights are downloaded), and a DLRM-style model whose interaction takes the lower triangle with
`torch.tril_indices`."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from torch import nn

import gnomon
from gnomon.errors import UnsupportedOpsError
from gnomon.executable import Executable

pytestmark = pytest.mark.filterwarnings(
    "ignore::torch.jit.TracerWarning", "ignore::DeprecationWarning", "ignore::UserWarning", "ignore::FutureWarning"
)

DOORS = ("module", "torchscript", "onnx")

SMALL = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 128,
         "vocab_size": 100, "max_position_embeddings": 64, "attn_implementation": "eager"}  # fmt: skip


def _gpt2() -> nn.Module:
    config = transformers.GPT2Config(n_embd=64, n_head=4, n_layer=2, vocab_size=100, n_positions=64,
                                     attn_implementation="eager")  # fmt: skip
    return transformers.GPT2LMHeadModel(config)


def _llama() -> nn.Module:
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL, num_key_value_heads=2))


def _bert() -> nn.Module:
    return transformers.BertModel(transformers.BertConfig(**SMALL))


def _t5_encoder() -> nn.Module:
    config = transformers.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=100,
                                   attn_implementation="eager")  # fmt: skip
    return transformers.T5EncoderModel(config)


def _vit() -> nn.Module:
    config = transformers.ViTConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128,
                                    image_size=32, patch_size=8, attn_implementation="eager")  # fmt: skip
    return transformers.ViTModel(config)


class FirstOutput(nn.Module):
    """A Hugging Face model's first output (logits or last hidden state) as one tensor, for every door."""

    def __init__(self, model: nn.Module, argument: str) -> None:
        super().__init__()
        self.model, self.argument = model, argument

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(**{self.argument: x})[0]


TOKENS = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(0))
PIXELS = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
HF_MODELS: dict[str, tuple[Callable[[], nn.Module], str, torch.Tensor]] = {
    "gpt2": (_gpt2, "input_ids", TOKENS),
    "llama": (_llama, "input_ids", TOKENS),
    "bert": (_bert, "input_ids", TOKENS),
    "t5-encoder": (_t5_encoder, "input_ids", TOKENS),
    "vit": (_vit, "pixel_values", PIXELS),
}


class DLRM(nn.Module):
    """Bottom MLP, one embedding table per sparse feature, pairwise dot products of the features below the
    diagonal (`torch.tril_indices`), top MLP. With `bags`, each table is an EmbeddingBag over offsets; without,
    each sample looks up a fixed number of rows and sums them."""

    def __init__(self, bags: bool, tables: int = 3, rows: int = 50, dim: int = 16, dense: int = 13) -> None:
        super().__init__()
        self.bags = bags
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(rows, dim, mode="sum") if bags else nn.Embedding(rows, dim) for _ in range(tables)
        )
        self.bottom = nn.Sequential(nn.Linear(dense, 32), nn.ReLU(), nn.Linear(32, dim), nn.ReLU())
        pairs = (tables + 1) * tables // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, dense: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        if self.bags:
            sparse = [table(indices[i], offsets[i]) for i, table in enumerate(self.tables)]
        else:
            sparse = [table(indices[i].view(dense.shape[0], -1)).sum(1) for i, table in enumerate(self.tables)]
        features = torch.stack([x, *sparse], 1)
        products = torch.bmm(features, features.transpose(1, 2))
        rows, cols = torch.tril_indices(features.shape[1], features.shape[1], offset=-1)
        return torch.sigmoid(self.top(torch.cat([x, products[:, rows, cols]], 1)))


DLRM_INPUTS = (
    torch.randn(4, 13, generator=torch.Generator().manual_seed(0)),
    torch.randint(0, 50, (3, 8), generator=torch.Generator().manual_seed(1)),
    torch.tensor([[0, 2, 5, 6]] * 3),
)


def _compile(model: nn.Module, inputs: tuple[torch.Tensor, ...], door: str, tmp_path: Path) -> Executable:
    if door == "module":
        return gnomon.compile(model, example_inputs=inputs)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if door == "torchscript":
            path = tmp_path / "model.pt"
            torch.jit.trace(model, inputs, strict=False, check_trace=False).save(str(path))
            return gnomon.compile(path, example_inputs=inputs)
        path = tmp_path / "model.onnx"
        # The dynamo exporter: the TorchScript-based one has no rule for tril_indices.
        torch.onnx.export(model, inputs, str(path), dynamo=True, verbose=False)
        return gnomon.compile(path)


def _relative_l2(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("name", sorted(HF_MODELS))
def test_hugging_face_models_match_eager(name: str, door: str, tmp_path: Path) -> None:
    build, argument, x = HF_MODELS[name]
    torch.manual_seed(0)
    model = FirstOutput(build().eval(), argument).eval()
    with torch.no_grad():
        want = model(x).numpy()
    (got,) = _compile(model, (x,), door, tmp_path).run([x.numpy()])
    assert got.shape == want.shape
    assert _relative_l2(got, want) <= 1e-4


@pytest.mark.parametrize("door", DOORS)
def test_dlrm_with_a_lower_triangle_interaction_matches_eager(door: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = DLRM(bags=False).eval()
    with torch.no_grad():
        want = model(*DLRM_INPUTS).numpy()
    (got,) = _compile(model, DLRM_INPUTS, door, tmp_path).run([x.numpy() for x in DLRM_INPUTS])
    assert _relative_l2(got, want) <= 1e-4


@pytest.mark.parametrize("door", ["module", "torchscript"])
def test_dlrm_with_embedding_bags_matches_eager(door: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = DLRM(bags=True).eval()
    with torch.no_grad():
        want = model(*DLRM_INPUTS).numpy()
    (got,) = _compile(model, DLRM_INPUTS, door, tmp_path).run([x.numpy() for x in DLRM_INPUTS])
    assert _relative_l2(got, want) <= 1e-4


def test_dlrm_with_embedding_bags_through_onnx_names_the_if(tmp_path: Path) -> None:
    """torch's ONNX exporter writes an EmbeddingBag as a Loop over the bags that appends each bag's sum to an ONNX
    sequence, an If choosing it: torch-mlir cannot lower that If (and gnomon has no sequences)."""
    model = DLRM(bags=True).eval()
    message = r"^unsupported op onnx\.If at node '[^']+' in model\.onnx \(torch-mlir cannot lower it\)"
    with pytest.raises(UnsupportedOpsError, match=message):
        _compile(model, DLRM_INPUTS, "onnx", tmp_path)
