"""The xDSL universe entry point: lets plain `xdsl-opt` see gnomon's dialects and passes."""

from xdsl.universe import Universe

from gnomon.registry import DIALECTS, PASSES

GNOMON_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES)
