"""The `gnomon` command line: `import`, `summary`, `compile`, `run`, `memory`, `tune`, `analyze`, `shard` and
`calibrate`.

User errors (a missing file, an unsupported op, a bad `--input-shape`) print one line each and
exit with status 2; `--debug` shows the traceback instead. So do bad arguments, and, as a last resort, an
OSError or MemoryError that no check caught first.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from gnomon.errors import GnomonError, GnomonWarning
from gnomon.files import check_readable, check_writable, writing
from gnomon.input_shapes import dim_ranges_of, input_shapes_of

if TYPE_CHECKING:
    from gnomon.recompute import RecomputeOptions

EXIT_USER_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse with its errors in one line, as gnomon's own are, rather than after the usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", type=Path, help="an .onnx, TorchScript .pt/.pth or torch.export .pt2 file (`run`: or a compiled .mlir)"
    )
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors")
    parser.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=DIMS",
        help="the shape of an input, e.g. x=1x3x224x224 (repeatable; TorchScript needs one per input), or the range"
        " of a named dynamic dim, e.g. seq=1..128",
    )


def _add_predicate_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--predicate",
        choices=("auto", "always", "never"),
        default="auto",
        help="data-dependent branches and bounded loops as straight-line code: where predicted faster (auto, the"
        " default), wherever possible, or never (graph-predicate's mode)",
    )


def _add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verify-each",
        action="store_true",
        help="verify the program after every pass, not once per pipeline, so that an internal error names the pass",
    )
    parser.add_argument(
        "--dump-ir",
        type=Path,
        metavar="DIR",
        help="write the program into DIR before the first pass (00-import.mlir, the torch dialect) and after each "
        "(01-torch-to-graph.mlir ... 12-kernel-to-rt.mlir, in the order `compile --print-pipeline` lists them), "
        "locations and weights included, so that `gnomon-opt -p` reruns any step",
    )


class _PrintPipeline(argparse.Action):
    """`--print-pipeline`: like `--version`, it prints and exits while parsing, so no model is needed."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from gnomon.pipeline import PIPELINES

        width = max(len(stage) for stage in PIPELINES) + 1
        for stage, spec in PIPELINES.items():
            print(f"{stage + ':':<{width}} {spec}")
        parser.exit()


def _check_paths(model: Path, outputs: Mapping[str, Path | None]) -> None:
    """The model file reads and each output given (by its option) names a file that can be written: checked
    before the import, which takes seconds."""
    check_readable(model)
    for flag, path in outputs.items():
        if path is not None:
            check_writable(path, flag)


def _cmd_import(args: argparse.Namespace) -> None:
    from gnomon.pipeline import load
    from gnomon.printing import print_module

    _check_paths(args.model, {"-o": args.output})
    if args.loss and not args.train:
        raise GnomonError("--loss trains the model: add --train")
    module = load(
        args.model,
        input_shapes=input_shapes_of(args.input_shape),
        verify_each=args.verify_each,
        dump_ir=args.dump_ir,
        train=args.train,
        loss=args.loss,
    )
    if args.output is None:
        print_module(module, sys.stdout, elide_weights=args.elide_weights, locations=args.print_debuginfo)
        return
    with writing(args.output, "-o") as stream:
        print_module(module, stream, elide_weights=args.elide_weights, locations=args.print_debuginfo)


def _cmd_summary(args: argparse.Namespace) -> None:
    from gnomon.frontends import import_model
    from gnomon.pipeline import to_graph
    from gnomon.summary import summarize

    check_readable(args.model)
    imported = import_model(args.model, input_shapes=input_shapes_of(args.input_shape))
    module = to_graph(imported, verify_each=args.verify_each, dump_ir=args.dump_ir)
    print(summarize(module, imported.input_names, imported.output_names).render())


def _cmd_compile(args: argparse.Namespace) -> None:
    from gnomon.executable import compile_model
    from gnomon.passes.graph_fuse import FusionDecision, explain, fusion_device
    from gnomon.passes.graph_layout import LayoutDecision, explain_layouts
    from gnomon.passes.graph_predicate import PredicateDecision
    from gnomon.passes.graph_predicate import explain as explain_predication

    _check_paths(args.model, {"-o": args.output})
    input_shapes = input_shapes_of(args.input_shape)
    device = fusion_device(args.device)  # a wrong name fails here, before the import's seconds
    if args.train:
        _compile_training(args, input_shapes)
        return
    _check_no_training_flags(args)
    decisions: list[FusionDecision] = []
    layouts: list[LayoutDecision] = []
    predications: list[PredicateDecision] = []
    executable = compile_model(
        args.model,
        input_shapes=input_shapes,
        dim_ranges=dim_ranges_of(args.input_shape),
        verify_each=args.verify_each,
        dump_ir=args.dump_ir,
        device=args.device,
        decisions=decisions,
        layouts=layouts,
        predicate=args.predicate,
        predications=predications,
    )
    if args.explain:
        if predications:
            print(explain_predication(predications, device.provenance))
        print(explain_layouts(layouts, device.provenance))
        print(explain(decisions, device.provenance))
    executable.save(args.output)


def _compile_training(args: argparse.Namespace, input_shapes: dict[str, list[int]] | None) -> None:
    from gnomon.optimizers import optimizer_label
    from gnomon.training_command import compile_training_file, optimizer_from_flags
    from gnomon.training_file import save_training_step

    if args.explain:
        raise GnomonError("--explain prints an inference program's choices; a training step's are not reported yet")
    if args.device != "auto":
        raise GnomonError("--device chooses an inference program's fusions; a training step fuses for this machine")
    optimizer = optimizer_from_flags(args.optimizer, args.lr, args.momentum)
    step, batch, _ = compile_training_file(
        args.model, input_shapes=input_shapes, loss=args.loss, optimizer=optimizer, seed=0,
        keep_gradients=not args.release_gradients,
    )  # fmt: skip
    save_training_step(step, batch, args.output)
    print(f"wrote the training step of {args.model.name} ({optimizer_label(optimizer)}) to {args.output}")


def _training_flags_given(args: argparse.Namespace) -> bool:
    """Whether any of --loss, --optimizer, --lr, --momentum, --release-gradients differs from its default."""
    return bool(args.loss or args.optimizer != "sgd" or args.lr is not None or args.momentum or args.release_gradients)


def _check_no_training_flags(args: argparse.Namespace) -> None:
    if _training_flags_given(args):
        raise GnomonError(
            "--loss, --optimizer, --lr, --momentum and --release-gradients are a training step's: add --train"
        )


def _cmd_run(args: argparse.Namespace) -> None:
    from gnomon.run_report import run_command

    check_readable(args.model)
    if args.train:
        from gnomon.training_command import optimizer_from_flags, train_command

        if args.backend != "native" or args.save_outputs or args.trace:
            raise GnomonError(
                "--train runs training steps on the native backend: no --backend, --save-outputs, --trace"
            )
        compiled = args.model.suffix == ".mlir"  # a compiled step: its loss, optimizer, shapes and batch are in it
        if compiled and (_training_flags_given(args) or args.input_shape or args.seed):
            raise GnomonError(
                f"{args.model} is a compiled training step: its loss, optimizer, shapes and batch were fixed by "
                "`gnomon compile --train` (compile it again to change them, or give --inputs)"
            )
        train_command(
            args.model,
            input_shapes=input_shapes_of(args.input_shape),
            loss=args.loss,
            optimizer=optimizer_from_flags(args.optimizer, args.lr, args.momentum),
            steps=args.steps,
            inputs=args.inputs,
            profile=args.profile,
            as_json=args.json,
            seed=args.seed,
            restore=args.restore,
            save_state=args.save_state,
            keep_gradients=not args.release_gradients,
            recompute=_recompute_options(args),
        )
        return
    _recompute_options(args)  # --budget without --train is an error
    if args.loss or args.steps != 1 or args.restore or args.save_state or args.release_gradients:
        raise GnomonError(
            "--loss, --steps, --restore, --save-state and --release-gradients train the model: add --train"
        )
    run_command(
        args.model,
        input_shapes=input_shapes_of(args.input_shape),
        inputs=args.inputs,
        save_outputs=args.save_outputs,
        backend=args.backend,
        profile=args.profile,
        as_json=args.json,
        seed=args.seed,
        trace=args.trace,
        verify_each=args.verify_each,
        dump_ir=args.dump_ir,
        predicate=args.predicate,
        dim_ranges=dim_ranges_of(args.input_shape),
    )


LOSSES = ("cross_entropy", "mse", "bce_with_logits", "nll")
"""`gnomon.with_loss`'s losses (`gnomon.frontends.torch_training.LOSSES`, which imports torch)."""
OPTIMIZERS = ("sgd", "adam", "adamw", "sparse-adam")


def _add_training_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--train", action="store_true", help="a training step of a .pt2 or TorchScript model that returns its loss"
    )
    parser.add_argument("--loss", choices=LOSSES, help="train a model that returns no loss with this one")
    parser.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="sgd",
        help="default: sgd; sparse-adam: Adam, embedding tables by torch.optim.SparseAdam's lazy update",
    )
    parser.add_argument("--lr", type=float, help="learning rate (default: torch's, 0.01 for SGD, 1e-3 for Adam)")
    parser.add_argument("--momentum", type=float, default=0.0, help="SGD's momentum (default 0)")
    parser.add_argument(
        "--release-gradients",
        action="store_true",
        help="update each parameter as soon as its gradient is ready and free the gradient (less memory)",
    )


def _add_recompute_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget",
        help="with --train: recompute forward values so that the step's arena fits this many bytes (256MiB) or this "
        "share of its arena without recomputation (40%%)",
    )
    parser.add_argument(
        "--solver", choices=("z3", "milp", "greedy", "sqrt", "none"), default="z3", help="--budget's solver"
    )
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds --budget's solver may search")


def _recompute_options(args: argparse.Namespace) -> RecomputeOptions | None:
    """--budget, --solver and --time-limit; the last two need the first."""
    from gnomon.recompute import RecomputeOptions, check_options

    if args.budget is None:
        if args.solver != "z3" or args.time_limit != 10.0:
            raise GnomonError("--solver and --time-limit choose how to meet a memory budget: add --budget")
        return None
    if not args.train:
        raise GnomonError("--budget recomputes a training step's forward values: add --train")
    check_options(args.budget, args.solver, args.time_limit)
    return RecomputeOptions(args.budget, args.solver, args.time_limit)


def _cmd_memory(args: argparse.Namespace) -> None:
    from gnomon.memory_command import memory_command
    from gnomon.training_command import optimizer_from_flags

    if not args.train:
        _check_no_training_flags(args)
    if args.model.suffix == ".mlir" and (_training_flags_given(args) or args.input_shape or args.batch):
        raise GnomonError(
            f"{args.model} is a compiled program: its shapes (and a training step's loss and optimizer) were fixed "
            "by `gnomon compile` (compile it again to change them)"
        )
    memory_command(
        args.model,
        train=args.train,
        input_shapes=input_shapes_of(args.input_shape),
        batch=args.batch,
        loss=args.loss,
        optimizer=optimizer_from_flags(args.optimizer, args.lr, args.momentum),
        plot=args.plot,
        recompute=_recompute_options(args),
        as_json=args.json,
        seed=args.seed,
        keep_gradients=not args.release_gradients,
    )


def _cmd_tune(args: argparse.Namespace) -> None:
    from gnomon.tuning.command import tune_command

    check_readable(args.model)
    tune_command(
        args.model,
        input_shapes=input_shapes_of(args.input_shape),
        budget_s=args.budget_s,
        top=args.top,
        retune=args.retune,
        device=args.device,
        seed=args.seed,
    )


def _cmd_analyze(args: argparse.Namespace) -> None:
    from gnomon.analysis import analyze
    from gnomon.bundled import model_path
    from gnomon.cost.plot import plot_roofline
    from gnomon.cost.trace import write_json

    # A bundled network may be named instead of given by path (`gnomon analyze light_resnet50`).
    model = args.model if args.model.exists() or args.model.suffix else model_path(str(args.model))
    _check_paths(model, {"--plot": args.plot, "--trace": args.trace})
    train = None
    if args.train:
        from gnomon.training_command import optimizer_from_flags

        train = optimizer_from_flags(args.optimizer, args.lr, args.momentum)
    elif args.optimizer != "sgd" or args.lr is not None or args.momentum or args.release_gradients:
        raise GnomonError("--optimizer, --lr, --momentum and --release-gradients are a training step's: add --train")
    if model.suffix == ".mlir" and (_training_flags_given(args) or args.input_shape or args.batch):
        raise GnomonError(
            f"{model} is a compiled program: its shapes (and a training step's loss and optimizer) were fixed by "
            "`gnomon compile` (compile it again to change them)"
        )
    if args.devices is not None:
        from gnomon.data_parallel_analysis import data_parallel_command

        data_parallel_command(model, args.devices, train, args.loss, input_shapes_of(args.input_shape))
        return
    report = analyze(
        model,
        device=args.device,
        target=args.target,
        input_shapes=input_shapes_of(args.input_shape),
        batch=args.batch,
        verify_each=args.verify_each,
        dump_ir=args.dump_ir,
        train=train,
        loss=args.loss,
        keep_gradients=not args.release_gradients,
    )
    if args.plot is not None:
        plot_roofline(report, args.plot)
    if args.trace is not None:
        write_json(args.trace, report.trace())
    print(report.to_json() if args.json else report.render())


def _cmd_calibrate(args: argparse.Namespace) -> None:
    from gnomon.calibrate import calibrate_command

    if args.output is not None:
        check_writable(args.output, "-o")
    if args.collectives:
        from gnomon.calibrate_collectives import calibrate_collectives_command

        calibrate_collectives_command(args.output, 2 if args.ranks is None else args.ranks, quick=args.quick)
        return
    if args.ranks is not None:
        raise GnomonError("--ranks is the number of processes of `gnomon calibrate --collectives`: add --collectives")
    calibrate_command(args.output, quick=args.quick, fit=not args.no_fit, force=args.force)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gnomon", description="A cost-model-driven ML compiler on xDSL and MLIR.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    verbs = parser.add_subparsers(dest="verb", required=True)

    importer = verbs.add_parser("import", help="import a model and print it in the graph dialect")
    _add_model_arguments(importer)
    importer.add_argument("-o", "--output", type=Path, help="write the program here instead of stdout")
    importer.add_argument("--elide-weights", action="store_true", help="print large constants as __elided__")
    importer.add_argument(
        "--train", action="store_true", help="the training step (forward and backward) of a .pt2 or TorchScript model"
    )
    importer.add_argument("--loss", choices=LOSSES, help="with --train: the loss of a model that returns none")
    importer.add_argument(
        "--print-debuginfo", action="store_true", help="print each op's location (its ONNX node or torch module path)"
    )
    _add_pipeline_arguments(importer)
    importer.set_defaults(run=_cmd_import)

    summary = verbs.add_parser("summary", help="import a model and summarize its graph")
    _add_model_arguments(summary)
    _add_pipeline_arguments(summary)
    summary.set_defaults(run=_cmd_summary)

    compiler = verbs.add_parser("compile", help="import, rewrite and lower a model to a program `gnomon run` executes")
    _add_model_arguments(compiler)
    _add_training_arguments(compiler)
    compiler.add_argument("-o", "--output", type=Path, required=True, help="the program file to write (.mlir)")
    compiler.add_argument(
        "--device",
        default="auto",
        help="the device whose predicted times decide fusion: auto (default: local when this machine is calibrated, "
        "else generic-cpu), local, a shipped device or a .toml file",
    )
    compiler.add_argument(
        "--explain",
        action="store_true",
        help="print every predication, layout and fusion choice: both predicted times and the decision",
    )
    _add_predicate_argument(compiler)
    _add_pipeline_arguments(compiler)
    compiler.add_argument(
        "--print-pipeline",
        action=_PrintPipeline,
        nargs=0,
        help="print the pipelines compile runs, one labelled `-p` string per stage for gnomon-opt or xdsl-opt, and "
        "exit; they are the same for every model, so model and -o may be left out",
    )
    compiler.set_defaults(run=_cmd_compile)

    runner = verbs.add_parser("run", help="compile (or load) a model and run it")
    _add_model_arguments(runner)
    runner.add_argument("--inputs", type=Path, help="an .npz with one array per input, keyed by input name")
    runner.add_argument("--save-outputs", type=Path, help="write the outputs to this .npz, keyed by output name")
    runner.add_argument("--backend", choices=("native", "reference"), default="native", help="default: native")
    runner.add_argument("--profile", action="store_true", help="time every kernel and show the memory plan")
    runner.add_argument("--json", action="store_true", help="print the outputs' summary (and profile) as JSON")
    runner.add_argument("--seed", type=int, default=0, help="seed of the random inputs used without --inputs")
    runner.add_argument(
        "--trace", type=Path, help="with --profile: write the measured timeline as Chrome trace-event JSON"
    )
    _add_predicate_argument(runner)
    _add_pipeline_arguments(runner)
    _add_training_arguments(runner)
    _add_recompute_arguments(runner)
    runner.add_argument("--steps", type=int, default=1, help="with --train: training steps to run (default 1)")
    runner.add_argument("--restore", type=Path, metavar="FILE", help="with --train: start from a saved training state")
    runner.add_argument(
        "--save-state", type=Path, metavar="FILE", help="with --train: save the whole training state (.npz) at the end"
    )
    runner.set_defaults(run=_cmd_run)

    memory = verbs.add_parser(
        "memory", help="a compiled model's memory (or its training step's): by category and layer, beside PyTorch's"
    )
    _add_model_arguments(memory)
    _add_training_arguments(memory)
    _add_recompute_arguments(memory)
    memory.add_argument("--batch", type=int, help="the batch size: every input's leading dim")
    memory.add_argument(
        "--plot", type=Path, metavar="FILE", help="draw each tensor's lifetime over the schedule (.png, .svg, .pdf)"
    )
    memory.add_argument("--json", action="store_true", help="print the memory as JSON")
    memory.add_argument("--seed", type=int, default=0, help="seed of the random batch")
    memory.set_defaults(run=_cmd_memory)

    tuner = verbs.add_parser(
        "tune", help="measure schedules for a model's generated kernels and keep the fastest for later runs"
    )
    _add_model_arguments(tuner)
    tuner.add_argument("--budget-s", type=float, default=600.0, help="seconds of measuring at most (default 600)")
    tuner.add_argument(
        "--top", type=int, default=4, help="schedules measured per kernel besides the default, the cost model's best"
    )
    tuner.add_argument("--retune", action="store_true", help="tune kernels the tuning database already has")
    tuner.add_argument(
        "--device", default="auto", help="the device whose cost model ranks the schedules (as `compile --device`)"
    )
    tuner.add_argument("--seed", type=int, default=0, help="seed of the random inputs the kernels run on")
    tuner.set_defaults(run=_cmd_tune)

    analyzer = verbs.add_parser("analyze", help="predict a model's cost per kernel and end to end on a device")
    _add_model_arguments(analyzer)
    analyzer.add_argument(
        "--device", default="local", help="local (the last `gnomon calibrate`), a shipped device or a .toml file"
    )
    analyzer.add_argument("--target", choices=("gnomon", "torch-eager"), default="gnomon", help="default: gnomon")
    analyzer.add_argument("--batch", type=int, help="rebind the inputs' first dim to this batch size")
    analyzer.add_argument("--json", action="store_true", help="print the report as JSON")
    analyzer.add_argument(
        "--devices", help="with --train: the step as PyTorch DDP runs it on a system (8xh100, 4xa100, 2xlocal, ...)"
    )
    analyzer.add_argument("--plot", type=Path, help="write a roofline plot (.png, .svg or .pdf)")
    analyzer.add_argument("--trace", type=Path, help="write the predicted timeline as Chrome trace-event JSON")
    _add_pipeline_arguments(analyzer)
    _add_training_arguments(analyzer)
    analyzer.set_defaults(run=_cmd_analyze)

    from gnomon.shard_command import add_shard_parser

    add_shard_parser(verbs, _add_model_arguments)

    calibrator = verbs.add_parser("calibrate", help="measure this machine into a device file (the `local` device)")
    calibrator.add_argument("-o", "--output", type=Path, help="the device file to write (default: the local device)")
    calibrator.add_argument("--quick", action="store_true", help="small problems and few repeats (seconds; rough)")
    calibrator.add_argument("--no-fit", action="store_true", help="keep the default efficiency factors")
    calibrator.add_argument(
        "--force", action="store_true", help="replace the device file even when the machine was busy meanwhile"
    )
    calibrator.add_argument(
        "--collectives",
        action="store_true",
        help="time all-reduce, all-gather, reduce-scatter and all-to-all between --ranks processes over gloo "
        "(the `local` system of `--devices Nxlocal`) instead of the device",
    )
    calibrator.add_argument("--ranks", type=int, help="processes for --collectives (default: 2)")
    calibrator.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    calibrator.set_defaults(run=_cmd_calibrate)
    return parser


def _error_lines(error: Exception) -> list[str]:
    """What `main` prints for a user error: gnomon's own message, or for an OSError or MemoryError that no check
    caught first, one line that names the file or the allocation (NumPy's says "Unable to allocate 7.81 EiB for
    an array with shape ...")."""
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename is not None else ""
        return [f"{where}{error.strerror or error}"]
    if isinstance(error, MemoryError):
        detail = str(error).strip().splitlines()
        return [f"out of memory: {detail[0] if detail else 'an allocation failed'}"]
    return str(error).splitlines()


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """gnomon's own warnings as one line, as its errors are; others as Python shows them."""
    if issubclass(category, GnomonWarning):
        print(f"gnomon: warning: {message}", file=file or sys.stderr)
        return
    _python_show_warning(message, category, filename, lineno, file, line)


_python_show_warning = warnings.showwarning


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    previous, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        args.run(args)
    except BrokenPipeError:
        return 0
    except (GnomonError, OSError, MemoryError) as error:
        if getattr(args, "debug", False):
            raise
        for line in _error_lines(error):
            print(f"gnomon: error: {line}", file=sys.stderr)
        return EXIT_USER_ERROR
    finally:
        warnings.showwarning = previous
    return 0


if __name__ == "__main__":
    sys.exit(main())
