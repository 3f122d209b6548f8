"""`gnomon-opt`: xDSL's opt driver over xDSL's and gnomon's dialects and passes.

gnomon's dialects and passes reach xDSL through the `xdsl.universe` entry point (see
`gnomon.universe`), so this driver differs from `xdsl-opt` only in how it reports errors, as the
`gnomon` CLI does: one line each and exit status 2, for gnomon's own errors and for what xDSL's
driver would show as a traceback (a missing or binary input, an unknown pass, a parse error, a
program that does not verify). `--debug` shows the traceback instead; `--verify-diagnostics` and
`--parsing-diagnostics` keep xDSL's behaviour, which lit tests rely on.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from gnomon.errors import FileAccessError, GnomonError
from gnomon.files import check_readable

EXIT_USER_ERROR = 2

_OP_NAME = re.compile(r'^\s*(?:%[^=]*=\s*)?"([^"]+)"')
"""The op name at the start of a line of generic MLIR: `%0 = "test.op"() ...` -> test.op."""


def _failing_op(error: DiagnosticException) -> str | None:
    """The op a verifier error is about: xDSL notes the whole module, with carets under that op's line."""
    for note in getattr(error, "__notes__", []):
        for above, line in itertools.pairwise(str(note).splitlines()):
            match = _OP_NAME.match(above)
            if line.lstrip().startswith("^") and match is not None:
                return match.group(1)
    return None


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


class GnomonOptMain(xDSLOptMain):
    version_format = "gnomon-opt built from xdsl version {xdsl_version}"

    stage: str = ""
    """Where the pipeline is, for an error: "" before the first pass, else `after <pass>` or `in <pass>`."""

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        # Loaded up front: the printer needs builtin to print a dense_resource section even when
        # the input named no builtin op and a pass created the first resource.
        self.ctx.load_registered_dialect("builtin")

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")

    def setup_pipeline(self) -> None:
        spec: str = self.args.passes
        try:
            unknown = [p.name for p in parse_pipeline(spec) if p.name not in self.available_passes]
        except ArgSpecParseError as error:
            detail = str(error).strip().splitlines()[-1].strip()
            raise GnomonError(f"-p {spec!r} is not a pass pipeline: {detail}") from error
        if unknown:
            raise GnomonError(f"-p {spec!r}: unknown pass '{unknown[0]}'")
        try:
            super().setup_pipeline()
        except ValueError as error:  # an option the pass does not have, or a value of the wrong type
            raise GnomonError(f"-p {spec!r}: {_first_line(error)}") from error
        verify = self.pipeline.callback

        def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
            self.stage = f"after {previous.name}" if previous is not None else ""
            if verify is not None:
                verify(previous, module, following)
            if following is not None:
                self.stage = f"in {following.name}"

        self.pipeline = dataclasses.replace(self.pipeline, callback=callback)

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        if self.args.input_file is not None:
            check_readable(Path(self.args.input_file))
        return super().get_input_stream()

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        try:
            return super().prepare_input()
        except ValueError as error:  # the only one it raises: no frontend for the file's extension
            extension = os.path.splitext(self.get_input_name())[1]
            raise GnomonError(
                f"{self.get_input_name()}: gnomon-opt reads MLIR text, not {extension or 'a file without extension'} "
                "(`gnomon import` imports a model)"
            ) from error

    def prepare_output(self) -> IO[str]:
        try:
            return super().prepare_output()
        except OSError as error:
            raise FileAccessError(f"cannot write -o {self.args.output_file}: {error.strerror}") from error

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        try:
            return super().parse_chunk(chunk, file_extension, start_offset)
        except UnicodeDecodeError as error:
            raise GnomonError(
                f"{self.get_input_name()} is not MLIR text: byte {error.start} is not UTF-8 (a binary file?)"
            ) from error

    def apply_passes(self, prog: ModuleOp) -> None:
        try:
            super().apply_passes(prog)
        except DiagnosticException as error:
            if self.args.verify_diagnostics:
                raise  # xDSL's driver prints it, as `--verify-diagnostics` lit tests expect
            where = f" {self.stage}" if self.stage else ""
            op = _failing_op(error)
            what = f"{op}: " if op is not None else ""
            if isinstance(error, VerifyException):
                message = f"{self.get_input_name()} does not verify{where}: {what}{_first_line(error)}"
                raise GnomonError(message) from error
            raise GnomonError(f"{self.get_input_name()}{where}: {what}{_first_line(error)}") from error


def _error_line(error: Exception) -> str:
    """One line for an error that `main` reports rather than show a traceback."""
    if isinstance(error, ParseError):  # `file:line:col: message`, as MLIR's parser starts its report
        return f"{error.span.get_location()}: {error.msg}"
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename is not None else ""
        return f"{where}{error.strerror or error}"
    if isinstance(error, MemoryError):
        return f"out of memory: {_first_line(error)}"
    return _first_line(error)


def main(args: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if args is None else args)
    try:
        # Constructing the driver parses the arguments and the pipeline: an unknown pass fails here.
        GnomonOptMain(description="gnomon's modular optimizer driver", args=argv).run()
    except BrokenPipeError:
        return 0
    except GnomonError as error:
        if "--debug" in argv:
            raise
        for line in str(error).splitlines():
            print(f"gnomon-opt: error: {line}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (ParseError, DiagnosticException, OSError, MemoryError) as error:
        if "--debug" in argv:  # read before argparse, since the driver's constructor may be what failed
            raise
        print(f"gnomon-opt: error: {_error_line(error)}", file=sys.stderr)
        return EXIT_USER_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
