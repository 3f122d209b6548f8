"""gnomon's pipelines, each defined once as a `-p` string, and the import of a model into the graph dialect.

A model goes through three pipelines, in order: `import` (a frontend's torch-dialect module into the graph
dialect), `inference` (the rewrites that inference allows) and `lowering` (kernels over one planned arena, in
the rt dialect; `graph-fuse` first decides by predicted time which ops share a kernel, and generated kernels
take the schedules `gnomon tune` measured fastest last). The passes that run
are parsed from these strings through gnomon's pass registry, so what
`gnomon compile --print-pipeline` prints is what runs, and `gnomon-opt -p` or `xdsl-opt -p` take the same
strings: the frontend's module carries what the passes need from the model file (its name, its inputs' and
outputs' names, the names of its dynamic input dims) as module attributes.

The module is verified once at the end of each pipeline: verifying a whole network after each of ten passes
is a sizeable part of its compile time. `verify_each` verifies after every pass instead, so that an internal
error names the pass after which the module stopped verifying (tests of passes use it).

`dump_ir` writes the module into a directory before the first pass of the import (`00-import.mlir`, the
frontend's torch-dialect module) and after every pass, numbered across the three pipelines:
`01-torch-to-graph.mlir` ... `12-kernel-to-rt.mlir`. A pass keeps its number whichever command ran it, and
each file is a whole module, locations and weights included, so that `gnomon-opt -p <the next pass>` reruns any
step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import VerifyException

from gnomon.context import gnomon_context
from gnomon.dialects.graph.base import bounds_attrs
from gnomon.errors import GnomonError
from gnomon.frontends import ImportedModel, import_model
from gnomon.registry import PASSES

PIPELINES: dict[str, str] = {
    "import": "torch-to-graph,graph-shape-inference,graph-canonicalize",
    "inference": "graph-predicate,graph-drop-dropout,graph-fold-batch-norm,graph-fold-constants,graph-canonicalize",
    "lowering": "graph-layout,graph-fuse,graph-to-kernel,kernel-to-rt,kernel-tuned-schedules",
}
"""The pipelines a model goes through, in order, by stage."""

INPUT_NAMES_ATTR = "gnomon.input_names"
OUTPUT_NAMES_ATTR = "gnomon.output_names"


def dump_directory(path: str | Path) -> Path:
    """The directory for `dump_ir`, created if missing, or a one-line error saying why it cannot be."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise GnomonError(f"cannot dump IR into {path}: it is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise GnomonError(f"cannot dump IR into {path}: {error.strerror}") from error
    return path


def _dump(module: ModuleOp, directory: Path, number: int, name: str) -> None:
    from gnomon.printing import print_module

    path = directory / f"{number:02d}-{name}.mlir"
    try:
        with open(path, "w") as stream:
            print_module(module, stream, locations=True)
    except OSError as error:
        raise GnomonError(f"cannot dump IR into {path}: {error.strerror}") from error


def run_pipeline(
    module: ModuleOp,
    stage: str,
    source: str,
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    spec: str | None = None,
    after_pass: Callable[[str, ModuleOp], None] | None = None,
) -> ModuleOp:
    """Run `PIPELINES[stage]` on `module` in place; `source` names the model in error messages. `spec` replaces
    the stage's string with one of the same passes, their options changed; `after_pass` sees the module after
    each pass, by the pass's name."""
    spec = PIPELINES[stage] if spec is None else spec
    directory = dump_directory(dump_ir) if dump_ir is not None else None
    stages = list(PIPELINES)
    number = sum(len(list(parse_pipeline(PIPELINES[s]))) for s in stages[: stages.index(stage)])

    running: ModulePass | None = None

    def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
        nonlocal number, running
        running = following
        if previous is None:
            if directory is not None and number == 0:
                _dump(module, directory, number, stage)
            return
        number += 1
        if after_pass is not None:
            after_pass(previous.name, module)
        if directory is not None:
            _dump(module, directory, number, previous.name)
        if verify_each:
            _verify_after(module, source, previous.name)

    try:
        PassPipeline.parse_spec(PASSES, spec, callback).apply(gnomon_context(), module)
    except VerifyException as error:  # a pass that infers types finds the module no longer verifies
        raise _verify_error(error, source, f"in {running.name if running else stage}") from error
    if not verify_each:
        _verify_after(module, source, f"{stage} ({spec})")
    return module


def to_graph(
    imported: ImportedModel,
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    dim_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> ModuleOp:
    """Run the import pipeline over a frontend's torch-dialect module; `dim_ranges` declares (or narrows) the range
    of named dynamic dims, beside the frontend's own (`dim_bounds`)."""
    from gnomon.cost.eager import MODULE_CALLS_ATTR
    from gnomon.passes.torch_to_graph import INPUT_DIM_NAMES_ATTR, SOURCE_ATTR

    module = imported.module
    module.attributes[SOURCE_ATTR] = StringAttr(imported.source)
    module.attributes[INPUT_NAMES_ATTR] = ArrayAttr(StringAttr(n) for n in imported.input_names)
    module.attributes[OUTPUT_NAMES_ATTR] = ArrayAttr(StringAttr(n) for n in imported.output_names)
    if imported.module_calls:
        module.attributes[MODULE_CALLS_ATTR] = IntegerAttr(imported.module_calls, i64)
    if any(any(names) for names in imported.input_dim_names):
        module.attributes[INPUT_DIM_NAMES_ATTR] = ArrayAttr(
            ArrayAttr(StringAttr(n) for n in names) for names in imported.input_dim_names
        )
    bounds = _dim_ranges(imported, dim_ranges or {})
    if bounds:
        module.attributes.update(bounds_attrs(bounds))
    return run_pipeline(module, "import", imported.source, verify_each=verify_each, dump_ir=dump_ir)


def _dim_ranges(imported: ImportedModel, given: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The frontend's dim ranges with the user's over them; a range for a dim no input has is an error."""
    names = {name for dims in imported.input_dim_names for name in dims if name}
    for name, (low, high) in given.items():
        if name not in names:
            known = ", ".join(sorted(names)) or "none"
            raise GnomonError(f"{imported.source} has no dynamic dim named '{name}' (its named dims: {known})")
        if not 1 <= low <= high:
            raise GnomonError(f"the range {low}..{high} of dim '{name}' is empty or starts below 1")
    return dict(imported.dim_bounds) | dict(given)


def _verify_after(module: ModuleOp, source: str, after: str) -> None:
    """Verify `module`, which a pass or pipeline named `after` has just rewritten."""
    try:
        module.verify()
    except VerifyException as error:
        raise _verify_error(error, source, f"after {after}") from error


def _verify_error(error: VerifyException, source: str, where: str) -> GnomonError:
    """A program that stops verifying is gnomon's bug, not the user's: say so, in one line. One exception: a
    reshape whose element counts disagree, because the model fixes sizes (often the batch) that the input
    shapes given to it change."""
    lines = [line for line in str(error).splitlines() if "does not verify" in line or line.startswith("graph.")]
    detail = lines[0].strip(" |") if lines else str(error).strip().splitlines()[0]
    if "graph.reshape: input" in detail and " elements, result " in detail:
        return GnomonError(f"the input shapes do not fit {source}: a reshape in the model fixes its sizes ({detail})")
    return GnomonError(f"internal error: the graph of {source} does not verify {where}: {detail}")


def load(
    model: Any,
    example_inputs: Sequence[Any] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dynamic_shapes: Any = None,
    *,
    verify_each: bool = False,
    dump_ir: str | Path | None = None,
    train: bool = False,
    loss: str | None = None,
    dim_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> ModuleOp:
    """Import a model (a path to .onnx/.pt/.pth/.pt2, an nn.Module or an ExportedProgram) into the graph dialect.

    `verify_each` verifies the module after every pass, not once at the end; `dump_ir` names a directory to write
    the module into after every pass (see this module's docstring). `train` imports the training step of a module
    (or .pt2 / TorchScript file) that returns its loss (a file's, or given `loss`, against a random target): a
    function of (parameters, updated buffers, inputs) to (loss, gradients, new buffers), before any optimizer.
    `dim_ranges` (name -> (smallest, largest)) declares the range of the model's named dynamic dims."""
    if dump_ir is not None:
        dump_directory(dump_ir)  # a bad directory fails before the (slow) frontend runs
    if train:
        imported = _import_training(model, example_inputs, input_shapes, loss)
    elif loss is not None:
        raise GnomonError("a loss is attached to train a model: add train=True (--train)")
    else:
        imported = import_model(model, example_inputs, input_shapes, dynamic_shapes)
    return to_graph(imported, verify_each=verify_each, dump_ir=dump_ir, dim_ranges=dim_ranges)


def _import_training(
    model: Any, example_inputs: Sequence[Any] | None, input_shapes: Mapping[str, Sequence[int]] | None, loss: str | None
) -> ImportedModel:
    from gnomon.frontends import check_model_kind
    from gnomon.frontends.torch_training import import_torch_training, training_model_from_file

    check_model_kind(model)
    if isinstance(model, str | Path):
        path = Path(model)
        module, batch = training_model_from_file(path, input_shapes, loss)
        return import_torch_training(module, batch, path.name)
    if loss is not None:
        from gnomon.frontends.torch_training import with_loss

        model = with_loss(model, loss)
    return import_torch_training(model, example_inputs, type(model).__name__)
