"""Save gnomon's reference torch models for the import tests: `make_torch.py MODEL OUT...`.

Each OUT's suffix picks the door: `.pt` is a TorchScript file (torch.jit.trace + torch.jit.save), `.pt2` a
torch.export file (torch.export.save). One process writes them all, so torch loads once.
"""

import sys
from pathlib import Path

import torch

from gnomon import models

if __name__ == "__main__":
    name, outs = sys.argv[1], sys.argv[2:]
    model = getattr(models, name)().eval()
    inputs = model.example_inputs()
    for out in outs:
        if Path(out).suffix == ".pt2":
            torch.export.save(torch.export.export(model, inputs), out)
        else:
            torch.jit.save(torch.jit.trace(model, inputs), out)
