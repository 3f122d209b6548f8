"""ONNX node conformance: every numeric node test case of ONNX, compiled and run by gnomon's native runtime.

The cases are ONNX's own (`onnx.backend.test.case.node.collect_testcases`: one model and one data set per
case, built in Python; expanded function bodies count as cases of their op). A case is *numeric* when every
input and output of its graph is a tensor whose element type NumPy holds natively (bool, 8 to 64-bit signed and
unsigned integers, float16/32/64): no strings, sequences, maps or optionals, and no bfloat16, float8, float4 or
sub-byte integers. Each numeric case runs through `gnomon.onnx_backend.GnomonBackend` in its own forked child
process with a timeout, because torch-mlir aborts the whole process on some inputs. A case ends as one of:

- pass: every output has the expected dtype and shape, and its values match (floats within rtol 1e-3 and atol
  1e-5, NaN matching NaN; integers and booleans exactly). A float16 element outside that tolerance still
  matches when it is no farther from the exact answer than ONNX's expected value is: the exact answer is the
  same model widened to float64 and run by `onnx.reference`. ONNX's reference rounds every intermediate step
  to float16 while gnomon, like PyTorch, may keep a step in float32, so both can sit a float16 step or two
  from the exact value on opposite sides;
- wrong: an output's count, dtype, shape or values differ;
- error: gnomon refused the case with one of its own errors (a `GnomonError`: unsupported op, import error...);
- exception: any other exception, a gnomon bug (a CLI user would see a traceback);
- crash: the child was killed by a signal or exited without a result (its last stderr line is kept);
- timeout: the child ran past `--timeout` seconds and was killed.

It prints the totals, a per-op table (cases, passed, the most common failure) and the largest failure groups;
`--json FILE` writes every case's result, so that two runs can be diffed.

    python bench/conformance.py [--ops Add,ReduceSum] [--json FILE] [--jobs 2] [--timeout 120] [--shuffle]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before torch loads: a spinning thread takes a shared core

import argparse
import json
import random
import re
import signal
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case.test_case import TestCase

RTOL = 1e-3
ATOL = 1e-5

NUMPY_TYPES = frozenset(
    {
        TensorProto.BOOL,
        TensorProto.INT8,
        TensorProto.INT16,
        TensorProto.INT32,
        TensorProto.INT64,
        TensorProto.UINT8,
        TensorProto.UINT16,
        TensorProto.UINT32,
        TensorProto.UINT64,
        TensorProto.FLOAT16,
        TensorProto.FLOAT,
        TensorProto.DOUBLE,
    }
)
"""The element types of a numeric case's tensors: those NumPy represents natively."""

EXPANDED = re.compile(r"_expanded(_ver\d+)?$")
"""The suffix of a case that runs an op's function body instead of the op."""

STATUSES = ("pass", "wrong", "error", "exception", "crash", "timeout")


@dataclass
class Result:
    name: str
    op: str
    """The ONNX op type the case tests (for an expanded case, the op whose function body it runs)."""
    expanded: bool
    status: str
    error: str = ""
    """The exception's class (error, exception), the signal (crash), or what differs (wrong)."""
    message: str = ""
    """The first line of the error, or of what differs."""
    seconds: float = 0.0
    specialized: bool = False
    """Whether the backend compiled it only with its parameter-like inputs bound (`gnomon.onnx_backend`)."""

    @property
    def reason(self) -> str:
        """The failure, with the case's own names and numbers taken out, to group failures by."""
        if self.status in ("pass", "timeout"):
            return self.status
        if self.error == "UnsupportedOpsError":
            return re.sub(r" at node '[^']*' in \S+", "", self.message)
        text = re.sub(r"\S+\.onnx\b", "<model>", self.message)
        text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
        return f"{self.status}: {self.error}: {text}" if self.error else f"{self.status}: {text}"


def exclusion(case: TestCase) -> str:
    """Why a case is not numeric, or "" when it is."""
    assert case.model is not None
    for value in (*case.model.graph.input, *case.model.graph.output):
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"{kind} values"
        if value.type.tensor_type.elem_type == TensorProto.STRING:
            return "string tensors"
        if value.type.tensor_type.elem_type not in NUMPY_TYPES:
            return "element types NumPy lacks"
    return ""


def op_types(cases: Sequence[TestCase]) -> dict[str, str]:
    """The op each case tests: its single node's type, or for an expanded case its unexpanded case's."""
    ops: dict[str, str] = {}
    for case in cases:
        assert case.model is not None
        nodes = case.model.graph.node
        if len(nodes) == 1 and not EXPANDED.search(case.name):
            ops[case.name] = nodes[0].op_type
    for case in cases:
        if case.name not in ops:
            ops[case.name] = ops.get(EXPANDED.sub("", case.name), "?")
    return ops


def _array(value: Any) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def widened(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every float16 tensor, value and cast made float64: it computes what the float16 model
    approximates."""
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    graph = wide.graph
    for value in [*graph.input, *graph.output, *graph.value_info]:
        if value.type.tensor_type.elem_type == TensorProto.FLOAT16:
            value.type.tensor_type.elem_type = TensorProto.DOUBLE
    for index, tensor in enumerate(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT16:
            graph.initializer[index].CopyFrom(_widened_tensor(tensor))
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.name in ("to", "dtype") and attribute.i == TensorProto.FLOAT16:
                attribute.i = TensorProto.DOUBLE
            if attribute.type == onnx.AttributeProto.TENSOR and attribute.t.data_type == TensorProto.FLOAT16:
                attribute.t.CopyFrom(_widened_tensor(attribute.t))
    return wide


def _widened_tensor(tensor: TensorProto) -> TensorProto:
    return numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name)


def exact_outputs(model: onnx.ModelProto, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The float64 outputs of the widened model, by ONNX's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    wide_inputs = [value.astype(np.float64) if value.dtype == np.float16 else value for value in inputs]
    names = [value.name for value in model.graph.input]
    return list(ReferenceEvaluator(widened(model)).run(None, dict(zip(names, wide_inputs, strict=True))))


def compare(
    actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], exact: Callable[[], Sequence[np.ndarray]]
) -> tuple[str, str]:
    """("", "") when the outputs match, else what differs and a one-line description. `exact` gives the
    float64 answers that arbitrate float16 elements outside the tolerance."""
    if len(actual) != len(expected):
        return "count", f"{len(actual)} outputs, expected {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        if got.dtype != want.dtype:
            return "dtype", f"output {index}: {got.dtype}, expected {want.dtype}"
        if got.shape != want.shape:
            return "shape", f"output {index}: shape {list(got.shape)}, expected {list(want.shape)}"
        if want.dtype.kind == "f":
            got64, want64 = got.astype(np.float64), want.astype(np.float64)
            close = np.isclose(got64, want64, rtol=RTOL, atol=ATOL, equal_nan=True)
            if not close.all() and want.dtype == np.float16:
                truth = np.asarray(exact()[index], dtype=np.float64)
                with np.errstate(invalid="ignore"):
                    close |= np.abs(got64 - truth) <= np.abs(want64 - truth)
            if not close.all():
                with np.errstate(invalid="ignore"):
                    worst = float(np.nanmax(np.abs(got64 - want64), initial=0.0))
                nans = int(np.count_nonzero(np.isnan(got64) != np.isnan(want64)))
                return "values", (
                    f"output {index}: {int(np.count_nonzero(~close))} of {want.size} elements differ, {nans} of them"
                    f" NaN against a number; max abs difference {worst:.3g} (rtol {RTOL}, atol {ATOL})"
                )
        elif not np.array_equal(got, want):
            return "values", f"output {index}: {int(np.count_nonzero(got != want))} of {want.size} elements differ"
    return "", ""


def _first_line(error: BaseException) -> str:
    """The error's first line, and its second where the first only introduces it (MLIR's "Unable to parse
    module assembly:")."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"[:300]
    return lines[0][:300] if lines else ""


def run_case(case: TestCase, op: str) -> Result:
    """Compile and run one case in this process."""
    from gnomon.errors import GnomonError
    from gnomon.onnx_backend import GnomonBackend

    assert case.model is not None
    assert case.data_sets is not None
    result = Result(case.name, op, bool(EXPANDED.search(case.name)), "pass")
    start = time.perf_counter()
    try:
        rep = GnomonBackend.prepare(case.model)
        result.specialized = rep.executable is None
        for inputs, outputs in case.data_sets:
            arrays = [_array(v) for v in inputs]
            what, message = compare(
                rep.run(arrays), [_array(v) for v in outputs], lambda: exact_outputs(case.model, arrays)
            )
            if what:
                result.status, result.error, result.message = "wrong", what, message
                break
    except GnomonError as error:
        result.status, result.error, result.message = "error", type(error).__name__, _first_line(error)
    except Exception as error:
        result.status, result.error, result.message = "exception", type(error).__name__, _first_line(error)
    result.seconds = time.perf_counter() - start
    return result


def _child(case: TestCase, op: str, connection: Connection, stderr_path: str) -> None:
    """A forked child: run the case with stdout and stderr in a file, send the result, and exit at once (torch's
    and MLIR's teardown is slow and not what is measured)."""
    log = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    warnings.simplefilter("ignore")
    connection.send(run_case(case, op))
    connection.close()
    os._exit(0)


@dataclass
class Running:
    case: TestCase
    op: str
    process: BaseProcess
    connection: Connection
    stderr_path: str
    start: float


def _last_line(path: str) -> str:
    try:
        with open(path, errors="replace") as stream:
            lines = [line.strip() for line in stream.read().splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _finish(running: Running, timed_out: bool) -> Result:
    """The result of a child that exited or ran out of time."""
    case, seconds = running.case, time.monotonic() - running.start
    expanded = bool(EXPANDED.search(case.name))
    result: Result | None = None
    if timed_out:
        running.process.kill()
        running.process.join()
        result = Result(case.name, running.op, expanded, "timeout", "", f"killed after {seconds:.0f} s", seconds)
    elif running.connection.poll():
        try:
            result = running.connection.recv()
        except (EOFError, OSError):
            result = None
    running.process.join()
    if result is None:
        code = running.process.exitcode or 0
        signal_name = signal.Signals(-code).name if code < 0 else f"exit status {code}"
        result = Result(case.name, running.op, expanded, "crash", signal_name, _last_line(running.stderr_path), seconds)
    running.connection.close()
    os.unlink(running.stderr_path)
    return result


def run_all(cases: Sequence[TestCase], ops: dict[str, str], jobs: int, timeout: float) -> Iterator[Result]:
    """Each case in its own forked child, `jobs` at a time; results in the order they finish."""
    context = get_context("fork")
    pending = list(reversed(cases))
    running: list[Running] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                case = pending.pop()
                receiver, sender = context.Pipe(duplex=False)
                descriptor, stderr_path = tempfile.mkstemp(prefix="gnomon-conformance-", suffix=".log")
                os.close(descriptor)
                process = context.Process(target=_child, args=(case, ops[case.name], sender, stderr_path))
                process.start()
                sender.close()
                running.append(Running(case, ops[case.name], process, receiver, stderr_path, time.monotonic()))
            deadline = min(r.start for r in running) + timeout
            wait([r.process.sentinel for r in running], timeout=max(0.0, deadline - time.monotonic()))
            for entry in list(running):
                timed_out = time.monotonic() - entry.start > timeout
                if timed_out or not entry.process.is_alive():
                    running.remove(entry)
                    yield _finish(entry, timed_out)
    finally:
        for entry in running:
            entry.process.kill()
            entry.process.join()
            os.unlink(entry.stderr_path)


def report(results: Sequence[Result], excluded: Counter[str], total: int) -> None:
    count = len(results)
    statuses = Counter(r.status for r in results)
    print(f"ONNX node conformance (onnx {onnx.__version__}): {count} numeric cases of {total}")
    print("  excluded: " + (", ".join(f"{n} with {why}" for why, n in excluded.most_common()) or "none"))
    for status in STATUSES:
        share = 100.0 * statuses[status] / count if count else 0.0
        print(f"  {status:<10} {statuses[status]:>5}  {share:5.1f}%")
    bound = sum(r.status == "pass" and r.specialized for r in results)
    print(f"  (passes that compiled only with their parameter-like inputs bound to the case's values: {bound})")
    errors = Counter(r.error for r in results if r.status in ("error", "exception"))
    print("  errors by class: " + (", ".join(f"{name} {n}" for name, n in errors.most_common()) or "none"))

    print(f"\n{'op':<36} {'cases':>5} {'pass':>5}  main failure")
    by_op: dict[str, list[Result]] = {}
    for r in results:
        by_op.setdefault(f"{r.op} (expanded)" if r.expanded else r.op, []).append(r)
    for op in sorted(by_op, key=str.lower):
        rows = by_op[op]
        passed = sum(r.status == "pass" for r in rows)
        failures = Counter(r.reason for r in rows if r.status != "pass")
        main = f"{failures.most_common(1)[0][0][:110]}" if failures else ""
        print(f"{op:<36} {len(rows):>5} {passed:>5}  {main}")

    groups: dict[str, list[Result]] = {}
    for r in results:
        if r.status != "pass":
            groups.setdefault(r.reason, []).append(r)
    print("\nlargest failure groups (cases, reason, e.g.):")
    for reason, rows in sorted(groups.items(), key=lambda item: -len(item[1]))[:30]:
        print(f"{len(rows):>5}  {reason[:150]}  [{rows[0].name}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", default="", help="comma-separated op types to run (default: all)")
    parser.add_argument("--json", default="", help="write every case's result to this file")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2, one per core)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a case may take (default 120)")
    parser.add_argument(
        "--shuffle",
        action="store_true",
        help="run the cases in a fixed random order: an interrupted run's part is a fair sample",
    )
    arguments = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that `finally` kills the children and writes the JSON

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # the cases' reference computations overflow on purpose
        from onnx.backend.test.case.node import collect_testcases

        cases = list(collect_testcases(None))
    ops = op_types(cases)
    wanted = {op for op in arguments.ops.split(",") if op}
    unknown = sorted(wanted - set(ops.values()))
    if unknown:
        sys.exit(f"conformance: no ONNX node test case for op(s) {', '.join(unknown)}")
    selected = [case for case in cases if not wanted or ops[case.name] in wanted]
    excluded = Counter(why for case in selected if (why := exclusion(case)))
    numeric = [case for case in selected if not exclusion(case)]
    if arguments.shuffle:
        random.Random(0).shuffle(numeric)

    # torch, torch-mlir and xDSL load once here; gnomon loads in each child, so that every case runs one consistent
    # version of gnomon's sources even when they change during a long run.
    import torch  # noqa: F401
    import torch_mlir.extras.onnx_importer
    import torch_mlir.passmanager  # noqa: F401
    import xdsl.dialects.builtin  # noqa: F401

    results: list[Result] = []
    start = time.monotonic()
    try:
        for result in run_all(numeric, ops, arguments.jobs, arguments.timeout):
            results.append(result)
            if len(results) % 50 == 0 or len(results) == len(numeric):
                passed = sum(r.status == "pass" for r in results)
                elapsed = time.monotonic() - start
                print(f"[{len(results)}/{len(numeric)}] {passed} pass, {elapsed:.0f} s", file=sys.stderr, flush=True)
                write_json(arguments.json, results, len(numeric))
    finally:
        write_json(arguments.json, results, len(numeric))
    report(sorted(results, key=lambda r: r.name), excluded, len(selected))


def write_json(path: str, results: Sequence[Result], numeric: int) -> None:
    """Every finished case's result (rewritten as a run goes on, so that an interrupted run leaves its part)."""
    if not path:
        return
    document: dict[str, Any] = {"onnx": onnx.__version__, "rtol": RTOL, "atol": ATOL, "numeric_cases": numeric}
    document["cases"] = [asdict(r) for r in sorted(results, key=lambda r: r.name)]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as stream:
        json.dump(document, stream, indent=1)


if __name__ == "__main__":
    main()
