"""`gnomon-opt`: xDSL's opt driver over xDSL's and gnomon's dialects and passes.

gnomon's dialects and passes reach xDSL through the `xdsl.universe` entry point (see
`gnomon.universe`), so this driver differs from `xdsl-opt` only in how it reports gnomon's
own errors: one line each and exit status 2, as the `gnomon` CLI does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from xdsl.utils.exceptions import ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from gnomon.errors import GnomonError


class GnomonOptMain(xDSLOptMain):
    version_format = "gnomon-opt built from xdsl version {xdsl_version}"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        # Loaded up front: the printer needs builtin to print a dense_resource section even when
        # the input named no builtin op and a pass created the first resource.
        self.ctx.load_registered_dialect("builtin")


def main(args: Sequence[str] | None = None) -> int:
    driver = GnomonOptMain(description="gnomon's modular optimizer driver", args=args)
    try:
        driver.run()
    except GnomonError as error:
        for line in str(error).splitlines():
            print(f"gnomon-opt: error: {line}", file=sys.stderr)
        return 2
    except ParseError as error:
        # The message already points at the line and column, as MLIR's parser does; no traceback.
        print(f"gnomon-opt: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
