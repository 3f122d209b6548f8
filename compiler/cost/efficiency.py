"""The efficiency factors of the analytical kernel models (`gnomon.cost.analytical`): what fraction of a device's
peaks and bandwidths each kernel family sustains, and the fixed costs of launches and calls. A device file's
`[efficiency]` table overrides the defaults of its kind; `gnomon calibrate` fits or measures them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from gnomon.cost.devices import Device, DeviceError

__all__ = ["CPU_EFFICIENCY", "GPU_EFFICIENCY", "Efficiency", "efficiency"]


@dataclass(frozen=True)
class Efficiency:
    """The factors of the analytical models: calibration fits them per device (its file's `[efficiency]` table)."""

    gemm: float
    """Fraction of the matrix peak a large GEMM's main loop sustains."""
    conv: float
    """Fraction of the matrix peak a large convolution's main loop sustains (oneDNN's direct convolutions are not
    the BLAS GEMMs of `gemm`)."""
    conv_call_s: float
    """Seconds a convolution call on channels-first activations takes beyond its launch, main loop and reorders'
    traffic: the library's setup, its reorders' own calls and their scratch buffers; what makes small convolutions
    slow."""
    gemm_tile_m: int
    """Rows of the largest output tile a core computes at once (a CUDA thread block; a CPU register block)."""
    gemm_tile_n: int
    """Columns of that tile."""
    gemm_min_tile: int
    """The smallest tile edge a library falls back to for a small problem."""
    gemm_k_overhead: int
    """Extra K steps per output tile: filling the pipeline with the first panels, storing the tile."""
    gemm_pack: float
    """Fraction of DRAM's bandwidth at which a CPU BLAS packs weights that come from DRAM (see the module docstring)."""
    vector: float
    """Fraction of the vector (fp32) peak elementwise code sustains."""
    depthwise: float
    """Fraction of the vector peak a depthwise convolution sustains."""
    pool: float
    """Fraction of the vector peak a 2-D pooling kernel's window reductions sustain."""
    pool3d: float
    """Fraction of the vector peak a 3-D pooling kernel's window reductions sustain (a local response norm's pool
    across channels, as torch-mlir lowers it)."""
    stream: float
    """Fraction of a cache level's bandwidth a streaming kernel sustains."""
    generated_stream: float
    """`stream` for gnomon's generated loops, which the calibration fits apart from the library's streaming kernels
    (pooling, concatenation, a BLAS's panels, the training kernels' rates): one factor for both priced the suite's
    generated elementwise kernels 1.2-1.8x too slow in cache, where the pools and copies pulled it down. ATen's
    elementwise ops keep `stream`: priced with this factor too, the validation set's eager predictions were worse
    (18-19% against 16-17%, two calibrations each). A device file fitted before the two were apart gives both its
    `stream`."""
    stream_dram: float
    """Fraction of DRAM's (HBM's) bandwidth a streaming kernel sustains (an out-of-place one: fetching each line
    it writes first is in the fraction; see `analytical.written_in_place`)."""
    transpose: float
    """Fraction of the streaming bandwidth a transposing kernel sustains."""
    library_call_s: float
    """Seconds a library call's launch takes beyond the runtime's launch: its dispatch, checks, output handling."""
    access_bytes: int
    """The granule of a random access: a cache line on a CPU, a DRAM sector on a GPU."""
    lookup_s: float
    """Seconds an embedding lookup spends on its index, beyond moving its row (ATen's CPU embedding bag checks each
    index and maps it to its bag one at a time)."""
    libm_call_s: float = 0.0
    """Seconds per element of a CPU kernel that calls libm (f32 pow: `powf`, one scalar call each, which also keeps
    the loop from vectorizing), gnomon's generated kernels and ATen's alike; `gnomon.cost.calls` adds it."""
    library_call_warm_s: float = 0.0
    """What `library_call_s` falls to when the traffic since the same function's last call stayed within the
    innermost cache level: its code and bookkeeping are still there (`gnomon.cost.calls.library_call_s`)."""
    pool_wake_s: float = 0.0
    """Seconds a generated kernel split over several threads takes beyond a one-thread launch: waking the OpenMP
    team and joining it (`gnomon.cost.program.kernel_cost`)."""
    channels_last_call_s: float = 10e-6
    """`conv_call_s` for a call on channels-last activations, which the library takes as they are: no reorder to
    set up, run or allocate for."""
    reorder: float = 0.3
    """Fraction of a memory level's bandwidth at which a CPU convolution library reorders channels-first activations
    into its blocked layout and its result back (`gnomon.cost.analytical`); the calibration suite's convolutions in
    both layouts set it apart from `conv`."""
    generated_conv: float = 0.8
    """Fraction of the fp32 peak gnomon's generated dense convolution sustains (`kernel_to_linalg.conv`, with its
    AVX-512 register tiles): 0.62-0.88 (median 0.8) of torch.mm's 202 GFLOP/s on the 2-core AVX-512 Xeon, for
    1x1 + 3x3 depthwise pairs of 128-640 channels at 9-24 pixels a side, outside bench/fusion.py's shapes, whole
    kernel with its launch; not yet fitted by calibration."""
    generated_conv_channels_last: float = 1.12
    """The same for gnomon's channels-last dense convolution (`kernel_to_linalg.conv_nhwc_dense`), which reads its
    activations in place and stores its vectors as they are: 0.76-1.30 (median 1.12) of the calibrated fp32 peak on
    fifteen layers of 3-1024 channels at 7x7 to 160x160 in none of the benchmarks' models, six 1x1 ones (dense and
    grouped: 1.11-1.14) and nine 3x3 and 5x5 ones, strides 1 and 2 (`bench/conv_kinds.py --layout nhwc --models
    layer:...`, the layers the bench's docstring names), whole kernel with its launch, on the 2-core AMD EPYC. Above
    1 because the calibrated peak (a BLAS product's, 205 GFLOP/s) sits below what this FMA-bound loop sustains; not
    yet fitted by calibration."""
    generated_depthwise: float = 0.35
    """Fraction of the fp32 peak the depthwise convolution fused after it sustains."""
    weights_dram: float = 0.5
    """Fraction of DRAM's bandwidth a library kernel reads weights or table rows from DRAM at (a BLAS's
    matrix-vector product, an embedding bag's gathered rows), fitted apart from `stream_dram`; a device file
    fitted before they were apart gives both its `stream_dram`."""
    norm_train: float = 0.5
    """Fraction of a streaming kernel's rate a training batch norm attains (ATen's: the batch statistics in passes
    over the input per channel, then the normalization)."""
    pool_grad: float = 0.5
    """Fraction of a streaming kernel's rate a pooling gradient attains (gnomon's runtime finds a max pool's
    window maxima again, then scatters each window's gradient into a zeroed input)."""
    onednn_pool: float = 1.0
    """Fraction of a streaming kernel's rate oneDNN's 2-D pooling attains over its copies. oneDNN picks its kernels
    by the CPU: on one AMD Zen 1 host (AVX2) a 3x3 max pool over a 64 x 112 x 112 image took 5.8 ms there against
    0.8 ms on ATen's channels-last kernel and 0.07 ms to copy the image (2 threads). Priced at a stream's rate, the
    suite's three oneDNN pools pulled the calibration's `stream` down to 0.05-0.07 of the caches' bandwidth (three
    calibrations), and with it every eager elementwise op: a rank's data-parallel training steps were priced
    1.03-1.82x (`bench/multidevice.py`); with this factor apart, 0.38 on the suite measured again minutes later
    and 1.03-1.28x."""
    index_add: float = 0.5
    """Fraction of a streaming kernel's rate at which an embedding table's rows are added into, row by row: its
    dense gradient's adds (after the table is zeroed at a stream's rate) and the sparse updates."""
    thin_call_cold_s: float = 0.0
    """What a thin call adds when its code path is no longer in any cache level: a generated kernel's launch (the
    runtime's loop, ctypes, the kernel's few KB of code) or a copy into ATen's copy kernel. Their paths are far
    shorter than a library call's, so their misses cost a fraction of `library_call_s`
    (`gnomon.cost.calls.cold_call_s`)."""
    post_op_s: float = 0.0
    """Seconds a CPU convolution library's call takes longer when it fuses post-ops (oneDNN's
    `mkldnn._convolution_pointwise` with an activation or a residual add): a fixed cost per call, measured by
    `gnomon calibrate` on a tiny convolution with a ReLU and without (2.6-4.4 us here in six calibrations; 3-5 us by
    hand on outputs of 8K-300K elements); it is what makes a small convolution's activation cheaper as a generated
    kernel of its own."""
    page_fault_s: float = 0.0
    """Seconds a kernel takes per 4 KiB page of a result in fresh memory, faulted in (and zeroed by the kernel of
    the OS) on its first touch: PyTorch eager's CPU tensors above glibc's mmap threshold are fresh mappings every
    time (`gnomon.cost.eager.fresh_pages_s`). 0 on a GPU, whose caching allocator keeps its freed blocks."""
    gemm_pack_rows: float = 0.0
    """What a CPU BLAS's copy of B (k x n) into its blocked panels costs a call, in rows of A it could have multiplied
    in that time: the panels are reused by every row, so a product of few rows pays the most for them. torch.mm by
    1024 x 1024 weights here: 0.52 of the peak at 16 rows, 0.80 at 64, 0.94 at 256, as if 16 rows were added."""
    gemm_pack_columns: float = 0.0
    """The same for A's copy (m x k), in columns of B: 0.75 of the peak at 16 columns, 0.96 at 64 (about 4)."""
    conv_k_overhead: float = 8.0
    """`gemm_k_overhead` of a convolution library's direct kernels, apart from the BLAS's: fitted together, the
    convolutions' set both, and a BLAS product of 32-deep rows was priced 3x too slow."""
    tbe_call_s: float = 0.0
    """fbgemm's table-batched embedding kernel (TorchRec's fused lookups) forward: what one call costs beside its
    tables' ids and rows (its autograd function, its allocations); one call looks up all of a sharding group's
    tables on a device. The `tbe_*` factors are measured by `gnomon calibrate` where fbgemm is installed
    (`gnomon.cost.tbe`); 0 elsewhere, where a shard is priced as `graph.embedding_bag` and its update are."""
    tbe_update_call_s: float = 0.0
    """The same for its fused backward and SGD update."""
    tbe_lookup_s: float = 0.0
    """That forward's seconds per id looked up, beside its distinct rows' fetch."""
    tbe_read: float = 0.0
    """The share of its memory level's bandwidth at which that forward fetches the distinct rows (whole granules,
    in random order)."""
    tbe_update_lookup_s: float = 0.0
    """The fused backward and SGD update's seconds per id (sorting the ids by row, summing each row's gradient)."""
    tbe_update: float = 0.0
    """The share of its memory level's bandwidth at which that update reads and writes each distinct row."""
    tbe_update_spread: float = 0.0
    """How much longer that update takes over a row from main memory for each doubling of its table beyond the last
    cache, as a share of the row's fetch: the rows of a larger table lie further apart (`gnomon.cost.tbe`)."""
    tbe_row_s: float = 0.0
    """The forward's seconds per distinct row beside its bytes: a random row costs an access whatever its width."""
    tbe_row_outgrown_s: float = 0.0
    """And per distinct row for each doubling of its table beyond the last cache (the row's address translation)."""
    tbe_update_row_s: float = 0.0
    """The update's seconds per distinct row beside its bytes."""
    tbe_update_row_outgrown_s: float = 0.0
    """And per distinct row for each doubling of its table beyond the last cache."""
    tbe_lookup_byte_s: float = 0.0
    """The forward's seconds per byte of each id's row: every id adds its row into its bag's sum, from cache where
    the row was fetched already."""
    tbe_update_lookup_byte_s: float = 0.0
    """The update's seconds per byte of each id's row: every id's pooled gradient row is added into its row's sum
    (a scalar loop in fbgemm's exact-SGD kernel on CPU)."""


GPU_EFFICIENCY = Efficiency(
    gemm=0.8, conv=0.8, conv_call_s=0.0, gemm_tile_m=256, gemm_tile_n=128, gemm_min_tile=32, gemm_k_overhead=32,
    conv_k_overhead=32,
    gemm_pack=1.0,
    vector=0.5, depthwise=0.3, pool=0.3, pool3d=0.3, stream=0.85, generated_stream=0.85, stream_dram=0.85,
    transpose=0.5, library_call_s=0.0,
    access_bytes=32, lookup_s=0.0, channels_last_call_s=0.0, weights_dram=0.85,
)  # fmt: skip
"""Typical of cuBLAS/CUTLASS-class kernels (tiles up to 256 x 128): starting values for calibration, not measured."""

CPU_EFFICIENCY = Efficiency(
    gemm=0.85, conv=0.85, conv_call_s=20e-6, gemm_tile_m=6, gemm_tile_n=16, gemm_min_tile=16, gemm_k_overhead=8,
    gemm_pack=0.2,
    vector=0.5, depthwise=0.3, pool=0.1, pool3d=0.05, stream=0.7, generated_stream=0.7, stream_dram=0.7, transpose=0.3,
    library_call_s=5e-6,
    access_bytes=64, lookup_s=20e-9, libm_call_s=5e-9, library_call_warm_s=2e-6, pool_wake_s=3e-6,
    thin_call_cold_s=2e-6, weights_dram=0.7, page_fault_s=1e-6, gemm_pack_rows=16.0, gemm_pack_columns=4.0,
    post_op_s=3e-6,
)  # fmt: skip
"""Typical of an AVX2 BLAS (a 6 x 16 fp32 register block): starting values for calibration, not measurements."""


def efficiency(device: Device) -> Efficiency:
    """The kind's defaults, overridden by the device file's `[efficiency]` table."""
    defaults = GPU_EFFICIENCY if device.kind == "gpu" else CPU_EFFICIENCY
    known = [f.name for f in fields(Efficiency)]
    for key in device.efficiency:
        if key not in known:
            raise DeviceError(f"device {device.name}: unknown [efficiency] key '{key}' (known: {', '.join(known)})")
    overrides = {
        key: int(value) if isinstance(getattr(defaults, key), int) else value
        for key, value in device.efficiency.items()
    }
    if "weights_dram" not in overrides and "stream_dram" in overrides:
        overrides["weights_dram"] = overrides["stream_dram"]  # a file fitted before the two were apart
    if "generated_stream" not in overrides and "stream" in overrides:
        overrides["generated_stream"] = overrides["stream"]  # likewise
    return replace(defaults, **overrides)
