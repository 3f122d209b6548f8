"""The `graph` dialect: one op per ML operation on builtin tensor types.

Ops live in modules by family (attention_train, control_flow, elementwise, nn, grad, linalg, recurrent,
recurrent_train, reduce, sampling, tensor, embedding); `base` holds the shared textual form and shape-rule
machinery; `canonicalization` holds the rewrite patterns that the ops declare through the traits of `traits`.
"""

from xdsl.ir import Dialect

from gnomon.dialects.graph.attention_train import ATTENTION_TRAIN_OPS
from gnomon.dialects.graph.base import GraphOperation, SymbolicDimsAttr
from gnomon.dialects.graph.control_flow import CONTROL_FLOW_OPS
from gnomon.dialects.graph.elementwise import ELEMENTWISE_OPS
from gnomon.dialects.graph.embedding import EMBEDDING_OPS
from gnomon.dialects.graph.grad import GRAD_OPS
from gnomon.dialects.graph.linalg import LINALG_OPS
from gnomon.dialects.graph.nn import NN_OPS
from gnomon.dialects.graph.recurrent import RECURRENT_OPS
from gnomon.dialects.graph.recurrent_train import RECURRENT_TRAIN_OPS
from gnomon.dialects.graph.reduce import REDUCE_OPS
from gnomon.dialects.graph.sampling import SAMPLING_OPS
from gnomon.dialects.graph.tensor import TENSOR_OPS

__all__ = ["Graph", "GraphOperation", "SymbolicDimsAttr"]

Graph = Dialect(
    "graph",
    sorted(
        [
            *ATTENTION_TRAIN_OPS,
            *CONTROL_FLOW_OPS,
            *ELEMENTWISE_OPS,
            *EMBEDDING_OPS,
            *GRAD_OPS,
            *LINALG_OPS,
            *NN_OPS,
            *RECURRENT_OPS,
            *RECURRENT_TRAIN_OPS,
            *REDUCE_OPS,
            *SAMPLING_OPS,
            *TENSOR_OPS,
        ],
        key=lambda op: op.name,
    ),
    [SymbolicDimsAttr],
)
