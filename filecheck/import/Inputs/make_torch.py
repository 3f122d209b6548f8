"""Save gnomon's reference torch models for the import tests: `make_torch.py MODEL DOOR OUT`.

DOOR is `script` (torch.jit.trace + torch.jit.save) or `export` (torch.export.save).
"""

import sys

import torch

from gnomon import models

if __name__ == "__main__":
    name, door, out = sys.argv[1], sys.argv[2], sys.argv[3]
    model = getattr(models, name)().eval()
    inputs = model.example_inputs()
    if door == "script":
        torch.jit.save(torch.jit.trace(model, inputs), out)
    else:
        torch.export.save(torch.export.export(model, inputs), out)
