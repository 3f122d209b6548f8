"""Model files that installed packages ship: the onnx package's backend test networks.

gnomon downloads nothing at run time; its demo, tests and benchmarks use these real networks
(`light/` holds AlexNet, DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet,
VGG-19 and ZFNet-512 with generated weights) and models built from code (`gnomon.models`).
"""

from __future__ import annotations

from pathlib import Path

from gnomon.errors import ModelLoadError


def onnx_test_data_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def light_models() -> list[Path]:
    return sorted((onnx_test_data_dir() / "light").glob("light_*.onnx"))


def model_path(name: str) -> Path:
    """A light network by name, e.g. `light_resnet50`."""
    path = onnx_test_data_dir() / "light" / f"{name}.onnx"
    if not path.exists():
        known = ", ".join(p.stem for p in light_models())
        raise ModelLoadError(f"no bundled model named {name!r}; bundled models: {known}")
    return path
