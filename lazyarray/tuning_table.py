"""The tuning table: every switch and threshold the kernels layer chooses by, in one place.

``la.config`` shows the values in force and sets the process-wide defaults; ``la.tuning(...)``
overrides some of them for a block of code (this thread / task only)::

    >>> import lazyarray as la
    >>> la.config.winograd
    True
    >>> with la.tuning(winograd=False):
    ...     la.config.winograd
    False

Environment variables set the defaults once, when lazyarray is imported; this module is the one
that reads them (``ENVIRONMENT`` lists them). It sits on the ground floor (it imports only
``errors``), so every kernel reads it wherever it lives. Each threshold was measured; the comment beside it
says where (``benchmarks/`` holds the scripts).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
import os
import sys
from dataclasses import dataclass, field, fields

from .errors import ParamError, ParamValueError, UnknownSettingError


def _user_cache_dir(environ) -> str:
    """The platform's per-user cache directory (``%LOCALAPPDATA%``, ``~/Library/Caches``, ``$XDG_CACHE_HOME``
    or ``~/.cache``), read once, at import."""
    if sys.platform == "win32":
        return environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~"), "Library", "Caches")
    return environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


JIT_CACHE_DIR = os.path.join(_user_cache_dir(os.environ), "lazyarray", "numba")


def _doc(default, text: str, env: str = ""):
    return field(default=default, metadata={"doc": text, "env": env})


@dataclass(frozen=True, slots=True)  # (slots: a field is read on hot paths, ~20 ns faster)
class Tuning:
    """Every switch and threshold the kernels layer reads (frozen: change it with ``la.tuning``
    or ``la.config``)."""

    # -- convolution: Winograd F(2x2, 3x3) and F(4x4, 3x3) (kernels/conv2d.py, benchmarks/winograd.py)
    winograd: bool = _doc(True, "Winograd convolutions for 3x3 stride-1 layers at all", "LAZYARRAY_WINOGRAD=0")
    winograd_max_tile: int = _doc(4, "largest Winograd output tile: 4 (F(4x4, 3x3)) or 2 (F(2x2, 3x3) only)",
                                  "LAZYARRAY_WINOGRAD")
    # F(2, 3) pays from 64 input channels and 256 output pixels in the batch (ResNet-18's layers).
    winograd_min_channels: int = _doc(64, "fewest input channels a Winograd convolution takes")
    winograd_min_pixels: int = _doc(256, "fewest output pixels (N * Ho * Wo) for F(2x2, 3x3), kernel transformed per call")
    winograd_cached_min_pixels: int = _doc(256, "fewest output pixels for F(2x2, 3x3) with the transformed kernel kept")
    # F(4, 3): its products shrink 1.78x but its kernel transform grows 2.25x (winograd4.py's notes).
    winograd4_min_channels: int = _doc(64, "fewest channels (input and output) for F(4x4, 3x3)")
    winograd4_min_pixels: int = _doc(1024, "fewest output pixels for F(4x4, 3x3), kernel transformed per call")
    winograd4_max_channels: int = _doc(256, "most channels for F(4x4, 3x3), kernel transformed per call")
    winograd4_cached_min_pixels: int = _doc(256, "fewest output pixels for F(4x4, 3x3) with the kernel kept")
    winograd4_cached_max_channels: int = _doc(512, "most channels for F(4x4, 3x3) with the kernel kept")
    # -- convolution: im2col layouts and threads
    per_image_min_pixels: int = _doc(64, "output pixels per image from which a batch runs one product per image "
                                     "(smaller images: one batch-last product for the whole batch)")
    conv_region: bool = _doc(True, "batch-last convolutions as one compiled parallel region (numba)")
    conv_region_min_macs: int = _doc(4_000_000, "fewest multiply-adds for which conv2d[region] runs on several "
                                     "threads (smaller: its one-thread region; the demo CNN's 0.7 and 2.7 M "
                                     "convolutions at batch 64 ran 2x slower on 2 threads than on 1)")
    conv_im2col_compiled: bool = _doc(True, "im2col's columns (kernels larger than 1x1) written by one compiled pass "
                                      "from the image, no padded copy: conv2d[im2col_compiled] (numba)")
    conv_direct_max_macs: int = _doc(1 << 15, "largest convolution (multiply-adds) conv2d[direct] takes: one compiled "
                                     "loop, no copies (past it the products' BLAS wins)")
    conv_blocked: bool = _doc(True, "convolutions of few filters (kernels larger than 1x1, no groups) as one compiled "
                              "loop per image, 4 output channels by 3 taps a pass: conv2d[blocked] (kernels/conv_blocked.py)")
    conv_blocked_max_filters: int = _doc(32, "most filters (output channels) conv2d[blocked] takes: past it the "
                                         "products' BLAS (im2col_compiled) is as fast")
    conv_blocked_min_filters: int = _doc(3, "fewest filters for which conv2d[blocked] takes a layer conv2d[direct] "
                                         "takes (one image): 0.6-0.7x direct's time from 3 filters up, slower "
                                         "under (a block of four computes them again)")
    conv_blocked_region: bool = _doc(False, "conv2d[blocked]'s loop over la.set_num_threads' threads in one compiled "
                                     "parallel region, images (or channel blocks) per thread: conv2d[blocked_region], "
                                     "conv2d_act / conv2d_add_relu[write_out_region] (kernels/blocked_region.py); off: "
                                     "on a quiet machine the real-model 2t rows ran no faster with it (resnet_mini b8 "
                                     "2.34-2.44x ort on, 2.29-2.36x off; b1 1.92-1.95x on, 1.51-1.71x off) and worse "
                                     "beside a busy core")
    conv_blocked_region_min_macs: int = _doc(1 << 19, "fewest multiply-adds conv2d[blocked_region] takes (smaller "
                                             "layers run blocked on the calling thread; 2 threads: 0.29 M ran "
                                             "1.0x, 0.59 M 0.82x, 1.2-1.8 M 0.63-0.69x blocked's time)")
    conv_residual: bool = _doc(True, "inference graphs: relu(add(conv2d(x), residual)) made one step "
                               "(nn.conv2d_add_relu; graph/passes/conv_residual.py)")
    conv_residual_write_out: bool = _doc(True, "nn.conv2d_add_relu's residual and relu in conv2d[blocked]'s write-out: "
                                         "nn.conv2d_add_relu[write_out] (kernels/conv_add_relu.py)")
    conv_act_write_out: bool = _doc(True, "nn.conv2d_act's relu in conv2d[blocked]'s write-out: "
                                    "nn.conv2d_act[write_out] (kernels/conv_act.py)")
    conv_direct_batch: bool = _doc(True, "batches of C-ordered images without groups take conv2d[direct] where an "
                                   "image is within conv_direct_max_macs (kernels/direct_batch.py)")
    conv1d: bool = _doc(True, "1-D convolutions (a unit-height image and kernel) as one compiled loop with their bias "
                        "and activation: conv2d[conv1d], nn.conv2d_act[conv1d] (kernels/conv1d.py)")
    conv1d_max_macs: int = _doc(1 << 18, "largest 1-D convolution (multiply-adds, the batch's) conv1d takes")
    conv1d_rows: bool = _doc(True, "stride-1 1-D convolutions conv1d takes as passes over one zero-padded row per "
                             "input channel, 4 output channels by 3 taps a pass: conv2d[conv1d, rows] "
                             "(kernels/conv1d_rows.py)")
    min_split_macs: int = _doc(1 << 24, "multiply-adds from which a convolution's images are split over the threads")
    batch_last_min_batch: int = _doc(16, "smallest batch the executor stores batch last (C, H, W, N)")
    batch_last_max_pixels: int = _doc(256, "largest image (H * W) the executor stores batch last")
    # -- copies derived from weights and kept (ops/derived.py: packed transposes, Winograd kernels)
    keep_weights: bool = _doc(True, "keep copies derived from weights (packed transposes, transformed kernels) "
                              "between calls", "LAZYARRAY_PACK_WEIGHTS")
    keep_weights_budget: int = _doc(1 << 30, "bytes all kept derived copies may hold together",
                                    "LAZYARRAY_PACK_BUDGET_MB (in MiB)")
    # -- the executor
    fuse: bool = _doc(True, "elementwise groups of a compiled graph run as fused chunked kernels "
                      "(a CachedOp's fuse= overrides)", "LAZYARRAY_FUSE")
    max_pool_windows: bool = _doc(True, "max_pool2d[windows] and max_pool2d_relu[windows]: pools with a stride over "
                                  "1 (padded too), each window folded in registers (kernels/pool_windows.py)")
    # avg_pool2d[compiled]'s loop over taps (windows that do not tile x) against the NumPy path's strided sums
    # (measured, 1 thread, process time: 3 x 3 stride 2 pools of 18K reads 29.5 against 36.4 us, 37K 55.6 against 46.4)
    avg_pool_compiled_max_taps: int = _doc(24576, "most reads (outputs times kernel taps) avg_pool2d[compiled] "
                                           "takes where its windows do not tile the input (kernels/pool_jit.py)")
    avg_pool_rows: bool = _doc(True, "avg_pool2d[compiled, rows]: a unit-height pool by 1 x k windows (a 1-D pool) "
                               "as one loop over rows, its windows' factors made once (kernels/pool_jit.py)")
    concat_in_place: bool = _doc(True, "a concatenation whose parts are contiguous stretches of its result (one "
                                 "image's channels) is written in place by its parts' steps (executor/concat_in_place.py)")
    fused_jit_after: int = _doc(2, "calls of a fused group that run chunked before its compiled loop "
                                "(fused[numba], numba installed) runs it")
    foreach_jit_after: int = _doc(2, "calls of a recurrent cell's foreach that run inline_loop before its compiled "
                                  "time loop (foreach[compiled_cell], numba installed) runs it")
    foreach_cell_max_macs: int = _doc(1 << 15, "most multiply-adds per step (all the cell's products, all rows) "
                                      "foreach[compiled_cell] takes (benchmarks/rnn_conv_ab.py --cell-sizes: 0.17x "
                                      "inline_loop at 2K, 0.45x at 16K, 0.9-1.7x at 64K: past it BLAS per step wins)")
    foreach_cell_fast_exp: bool = _doc(True, "foreach[compiled_cell] in float32: sigmoid and tanh through a vectorized "
                                       "float64 exp (kernels/scan_jit.py exp_rows; within one rounding of the exact "
                                       "values) instead of the C library's per value")
    foreach_cell_f32_math: bool = _doc(True, "with foreach_cell_fast_exp: that sigmoid and tanh in float32 arithmetic "
                                       "(kernels/scan_jit.py unary_f32: eight values a vector instruction, within 3 "
                                       "ulps of the exact values; 0.4x the float64 one's time)")
    param_cache_max_bytes: int = _doc(64 << 20, "bytes the kept values of one compiled program's parameter-only "
                                      "steps may hold (executor/param_cache.py; larger ones run every call; 0: none kept)")
    # -- saying what runs
    log_kernels: bool = _doc(False, "log each new choice of implementation (op, shapes, implementation) to the "
                             "'lazyarray.kernels' logger", "LAZYARRAY_LOG=kernels")
    full_tracebacks: bool = _doc(False, "keep lazyarray's own frames in the traceback of an error raised inside a "
                                 "block call (by default they are left out, with a note saying how many)",
                                 "LAZYARRAY_FULL_TRACEBACK")
    # -- dense
    dense_region: bool = _doc(True, "one-row dense layers with large weights as one compiled parallel region")
    dense_stack: bool = _doc(True, "dense of an input of more than 2 dims into a C-ordered planned buffer as "
                             "one ndarray.dot into it, the bias added in place (kernels/dense.py: stack)")
    dense_region_min_weight_bytes: int = _doc(1 << 20, "smallest weight (bytes) a dense parallel region takes")
    dense_residual: bool = _doc(True, "a dense layer and the residual add of its value in the step after it as one "
                                "step (executor/epilogue.py: nn.dense+add[stack, residual])")
    dense_gelu: bool = _doc(True, "a dense layer and the exact GELU that alone reads its value, the step after it, as one "
                            "step, the bias added in the GELU's loop (kernels/dense_gelu.py: nn.dense+nn.gelu[stack])")
    # -- take (kernels/take.py)
    take_gather: bool = _doc(True, "take of NumPy arrays by numpy.take's own bounds check, a 0-d index as a basic "
                             "index and a copy (kernels/take.py: take[gather]); off: the reference's reductions")
    # -- relu (kernels/elementwise.py, kernels/relu_step.py)
    relu_flat_step: bool = _doc(True, "a compiled step's relu[compiled] of C-ordered float arrays calls its compiled "
                                "loop on flat views, checking only what a call can change: relu[compiled, flat] "
                                "(kernels/relu_step.py); off: relu[compiled]'s runner")
    # -- layer_scale_residual (graph/passes/layer_scale.py, kernels/layer_scale.py)
    layer_scale_residual: bool = _doc(True, "inference graphs: r + transpose(gamma * y) (ConvNeXt's layer scale, "
                                      "permute back and residual add) as one nn.layer_scale_residual "
                                      "(graph/passes/layer_scale.py)")
    layer_scale_compiled: bool = _doc(True, "nn.layer_scale_residual of NumPy float arrays in one compiled loop, "
                                      "bit for bit (kernels/layer_scale.py: layer_scale_residual[compiled]); off: "
                                      "the reference's ufuncs")
    # -- compiled kernels and threads (jit.py, threads.py)
    jit: bool = _doc(True, "compiled CPU kernels (numba, where installed; off: NumPy's kernels only)",
                     "LAZYARRAY_JIT")
    jit_first_run: bool = _doc(False, "compiled kernels (numba) in a compiled program's first run per input "
                               "signature; off: that run takes the NumPy kernels and they load or compile from its "
                               "second run (jit.first_run; a run under la.profile() / explain() takes them either way)")
    jit_cache_dir: str = _doc(JIT_CACHE_DIR, "directory compiled kernels are cached in between processes (jit.py: "
                              "capped, jit.clear_disk_cache() empties it); '': compile in every process",
                              "LAZYARRAY_JIT_CACHE_DIR (a path; 0 or off: no disk cache)")
    default_threads: int = _doc(0, "threads before any la.set_num_threads; 0: the cores this process may run on",
                                "OMP_NUM_THREADS (a positive int; anything else: 0)")
    # -- memory and caches (aval.py, executor/)
    max_alloc_bytes: int | None = _doc(None, "largest single allocation in bytes; None: the machine's physical "
                                       "memory (larger requests raise la.OutOfMemoryError)",
                                       "LAZYARRAY_MAX_ALLOC_BYTES (an int such as 8000000000, 8e9 or 0x...)")
    cache_size: int = _doc(64, "input signatures a CachedOp, hybridized block or graph cache keeps compiled "
                           "(cache_size= per object overrides)", "LAZYARRAY_CACHE_SIZE")
    cache_bytes: int = _doc(256 << 20, "bytes the compiled signatures of one CachedOp or block may hold "
                            "(cache_bytes= per object overrides)", "LAZYARRAY_CACHE_BYTES (an int or 5e8)")
    graph_cache: bool = _doc(True, "materialization keeps compiled programs of the lazy graphs it has seen",
                             "LAZYARRAY_GRAPH_CACHE")
    graph_cache_bytes: int = _doc(64 << 20, "planned buffers all of materialization's cached programs may hold")
    # -- warnings
    storage_fallback_warn: bool = _doc(True, "warn once per op and storage types when sparse inputs are densified",
                                       "LAZYARRAY_STORAGE_FALLBACK_WARN")
    sbp_fallback_warn: bool = _doc(True, "warn once per op that has no SBP rule and runs on whole inputs",
                                   "LAZYARRAY_SBP_FALLBACK_WARN")

    # -- data-parallel training (distributed/data_parallel.py): gradients reduced among workers in buckets
    # of this size (PyTorch DDP's 25 MB): the tasks of a step grow with the bytes, not with the arrays
    dp_bucket_bytes: int = _doc(25 << 20, "bytes of one gradient bucket DataParallel reduces among its workers")
    # -- recurrent layers (graph/passes/scan_projection.py)
    foreach_projection_max_macs: int = _doc(1 << 15, "inference graphs: most multiply-adds per step (all rows) of a "
                                            "recurrent layer's input projection (matmul and bias add before its "
                                            "foreach) computed by the loop's body step by step where a compiled cell "
                                            "runs it (numba installed; 0: none; benchmarks/rnn_conv_ab.py)")
    foreach_projection_max_call_macs: int = _doc(1 << 17, "inference graphs: most multiply-adds over every step "
                                                 "(length x rows x features x units) of such a projection computed "
                                                 "by the loop's body (past it one BLAS product before the loop wins; "
                                                 "lstm_bidir b8's second layer: 7 x 16K in the loop, 0.92x CPU time)")

    # -- transformer inference rewrites (graph/passes/attention.py, layer_norm.py; benchmarks/real_models.py --ab)
    fuse_attention: bool = _doc(True, "inference graphs: matmul, score ops, softmax, matmul as one nn.fused_attention")
    patch_embedding_dense: bool = _doc(True, "inference graphs: a conv2d whose windows tile its input (stride = "
                                       "kernel, no padding: a ViT's patch embedding) as one dense of its patches "
                                       "(graph/passes/patch_embedding.py)")
    identity_gathers: bool = _doc(True, "inference graphs: an advanced_index whose constant index arrays read its "
                                  "input in order as a reshape (graph/passes/identity_gather.py)")
    attention_masks_narrow: bool = _doc(True, "inference graphs: a fused attention's extra that is broadcast_to(v) "
                                        "reads v, where(broadcast_to(c), x, y) where(c, x, y): the attention "
                                        "broadcasts it (graph/passes/attention_masks.py)")
    attention_compiled: bool = _doc(True, "nn.fused_attention[compiled]: its score chain and the softmax's row maxima "
                                    "in one compiled pass, the parameters found once per step (kernels/attention.py)")
    attention_head_loop_max_macs: int = _doc(1 << 15, "nn.fused_attention[head_loop]: most multiply-adds (heads x "
                                             "queries x keys x (features + values)) of an attention run as one "
                                             "compiled loop per head (numba installed; 0: never; kernels/attention.py)")
    fuse_layer_norm: bool = _doc(True, "inference graphs: a layer norm written out in ops as one nn.layer_norm")
    fuse_gelu: bool = _doc(True, "inference graphs: the exact GELU with erf written out (ONNX Erf as the importer "
                           "expands it) as one nn.gelu (graph/passes/gelu.py)")
    fuse_gelu_tanh: bool = _doc(True, "inference graphs: the tanh GELU written out (0.5 x (1 + tanh(sqrt(2/pi) (x + "
                                "0.044715 x^3))), GPT-2's) as one nn.gelu (graph/passes/gelu.py's fuse_gelu_tanh)")
    gelu_erf_float64: bool = _doc(False, "nn.gelu's erf form on float32 values computed in float64 and rounded once: "
                                  "within 2.9e-7 of the exact GELU over [-8, 8] (float32: 1.1e-6), about twice the "
                                  "time (ops/norm.py, kernels/gelu.py)")
    gelu_tanh_compiled: bool = _doc(True, "nn.gelu's tanh form on float32 values as x / (1 + e^(-2u)) in float64 in one "
                                    "compiled loop, rounded once: within 1 ulp of the exact tanh GELU, not the "
                                    "reference's float32 bits (kernels/gelu.py's compiled_tanh)")
    layer_norm_in_place_max_bytes: int = _doc(1 << 20, "largest input layer_norm's in_place runs (kernels/layer_norm.py)")
    layer_norm_strided_rows: bool = _doc(True, "layer_norm's strided_rows: a channels-last view's rows (ConvNeXt) in one "
                                         "compiled call (kernels/layer_norm.py)")

    # -- small CNN layers (benchmarks/real_models.py --ab-cnn): a 1x1 convolution as one product per call
    conv_pointwise: bool = _doc(True, "1x1 convolutions (stride 1, no padding, no groups) as one product "
                                "(weight (O, C) @ image (C, H*W)) written into the output: conv2d[pointwise]")
    conv_pointwise_strided: bool = _doc(True, "1x1 convolutions with a stride (no padding, no groups) that would take "
                                        "im2col: the strided pixels copied once, then one product per image, "
                                        "im2col's values bit for bit: conv2d[pointwise_strided]")
    conv_patchify: bool = _doc(True, "convolutions whose windows tile their input (stride equal to the kernel, no "
                               "padding, no groups) as one copy of the patches and one product, im2col's values bit "
                               "for bit: conv2d[patchify] (kernels/conv_patchify.py)")
    conv_patchify_min_channels: int = _doc(8, "fewest input channels conv2d[patchify] takes (fewer: runs of a few "
                                           "values to copy, conv2d[blocked] is faster)")
    conv_patchify_min_macs: int = _doc(100_000, "fewest multiply-adds conv2d[patchify] takes (fewer: conv2d[blocked]'s "
                                       "one loop costs less than the views and calls)")
    conv_pointwise_loop: bool = _doc(True, "small 1x1 convolutions with a bias and an activation (conv2d[pointwise]'s "
                                     "case) as one compiled loop: nn.conv2d_act[loop] (kernels/pointwise_loop.py)")
    conv2d_pointwise_loop: bool = _doc(True, "small 1x1 convolutions with a bias and no activation as conv2d_act[loop]'s "
                                       "compiled loop: conv2d[loop] (kernels/pointwise_loop.py)")
    conv_pointwise_loop_max_macs: int = _doc(1 << 15, "largest nn.conv2d_act[loop] (multiply-adds, the batch's): past "
                                             "it BLAS's product and one compiled pass (fused) win")
    conv_pointwise_loop_narrow_weights: int = _doc(512, "1x1 layers of at most this many weights (O * C) take the "
                                                   "loop up to 16 times conv_pointwise_loop_max_macs (BLAS is slow "
                                                   "on so narrow a weight; kernels/pointwise_loop.py)")
    conv_activation: bool = _doc(True, "inference graphs: a convolution's relu, hardsigmoid or hardswish "
                                 "made one step with it (nn.conv2d_act; graph/passes/conv_activation.py)")
    shape_views: bool = _doc(True, "expand_dims and squeeze of NumPy arrays as one reshape to the output's shape, "
                             "computed once per compiled step (kernels/shape_views.py)")
    extremum_ufunc: bool = _doc(True, "max and min of NumPy arrays as np.maximum.reduce / np.minimum.reduce, the axes "
                                "normalized once per compiled step (kernels/extrema.py)")
    extremum_rows: bool = _doc(True, "compiled steps' max and min of a C-ordered float array over its last axis as one "
                               "compiled loop over the rows: max[rows], min[rows] (kernels/extrema_rows.py)")
    matmul_bias: bool = _doc(True, "inference graphs: a product by a matrix and the bias added to it as one "
                             "nn.dense (graph/passes/matmul_bias.py)")
    merge_projections: bool = _doc(True, "inference graphs: dense layers reading one input (a transformer's query, key "
                                   "and value) as one nn.dense split by views (graph/passes/merge_projections.py)")
    fuse_batch_norm_relu: bool = _doc(True, "inference graphs: a batch norm and the relu that alone reads it (DenseNet's "
                                      "pre-activation) made one step (nn.batch_norm_relu; "
                                      "graph/passes/batch_norm_relu.py)")
    squeeze_excite: bool = _doc(True, "inference graphs: a squeeze-excitation block (global mean, 1x1 conv + relu, "
                                "1x1 conv + hardsigmoid, product with the input: MobileNetV3's) made one step "
                                "(nn.squeeze_excite; graph/passes/squeeze_excite.py)")
    pool_relu: bool = _doc(True, "inference graphs: a max pool and the relu that alone reads it made one step "
                           "(nn.max_pool2d_relu; graph/passes/pool_relu.py)")
    drop_kept_dims: bool = _doc(True, "inference graphs: a reshape that only drops a mean's kept unit axes made "
                                "the mean without keepdims (graph/passes/drop_kept_dims.py)")
    channel_shuffle: bool = _doc(True, "inference graphs: a channel shuffle (reshape, transpose, reshape: ShuffleNet's) "
                                 "of a value or of a concatenation made one step, each input copied once "
                                 "(nn.channel_shuffle; graph/passes/channel_shuffle.py)")

    # -- the contention guard (kernels/contention.py): a parallel region that stalls (another process
    # holds a core, the OS holds one of its threads back) sends the threaded kernels to their one-thread
    # fallbacks for a back-off window (benchmarks/real_models.py --busy, benchmarks/small_graphs.py --busy)
    contention_guard: bool = _doc(True, "threaded kernels (numba regions, splits over the pool) run their one-thread "
                                  "fallback for a while after one of their regions stalls")
    contention_stall_ratio: int = _doc(3, "a region stalled when it took more than this many times its expected "
                                       "time (the fastest seen for its plan; a split's CPU time per thread) ...")
    contention_min_stall_us: int = _doc(100, "... and at least this many microseconds more")
    contention_backoff_ms: int = _doc(100, "milliseconds the threaded kernels step aside after a stall (doubled "
                                      "while stalls follow the windows)")
    contention_max_backoff_ms: int = _doc(1600, "longest back-off window (milliseconds)")
    # (splits over the pool take parts as their threads free up, so a thread held back costs one part's wait:
    # beside a busy core conv2d[split] and Winograd ran 1.1-1.6x their quiet one-thread time, stepping aside
    # after their stalls 1.1-2.1x, one thread alone 1.8-2.2x: benchmarks/busy_kernels.py)
    contention_splits: bool = _doc(False, "splits over the pool (conv2d[split], Winograd) also time their waits and "
                                   "run on the calling thread while contended")
    # (one BLAS thread and two give float32 products that differ in their last bits, OpenBLAS's edge kernels
    # at the split: on, a product's values would hang on the guard's state; kernels/blas_guard.py)
    contention_blas: bool = _doc(False, "products left to BLAS's threads (blas_threads.MIN_PARALLEL_FLOPS or more) "
                                 "also time themselves and run on one BLAS thread while contended")
    # (row blocks cut at multiples of blas_rows.ROW_ALIGN keep the bits of the whole product on one BLAS thread:
    # one thread, two and the guard's window give the same values; kernels/blas_rows.py)
    blas_row_blocks: bool = _doc(False, "dense and matmul products of blas_threads.MIN_PARALLEL_FLOPS or more, with "
                                 "several threads set, run in row blocks over the pool, each on one BLAS thread "
                                 "(the same bits at any thread count; steps aside beside a busy core); off: on a "
                                 "quiet machine BLAS's own threads ran the MLP training step faster (batch 1024 "
                                 "1.63-1.82x NumPy by hand with it, 1.00x without)")

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None and DEFAULTS[f.name] is None:  # (an int setting whose default is "none set")
                continue
            want = bool if isinstance(DEFAULTS[f.name], bool) else str if isinstance(DEFAULTS[f.name], str) else int
            if want is str and not isinstance(v, str):
                raise ParamError(f"tuning: {f.name} takes a str (a path; '': off), got {v!r} ({type(v).__name__})")
            if want is int and (isinstance(v, bool) or not isinstance(v, int)):
                also = " or None" if DEFAULTS[f.name] is None else ""
                raise ParamError(f"tuning: {f.name} takes an int{also}, got {v!r} ({type(v).__name__})")
            if want is bool and not isinstance(v, bool):
                raise ParamError(f"tuning: {f.name} takes True or False, got {v!r} ({type(v).__name__})")
            if want is int and v < 0:
                raise ParamValueError(f"tuning: {f.name} must be >= 0, got {v}")
        if self.winograd_max_tile not in (2, 4):
            raise ParamValueError(f"tuning: winograd_max_tile is 2 or 4, got {self.winograd_max_tile}")
        if self.jit_cache_dir and not os.path.isabs(self.jit_cache_dir):
            raise ParamValueError(f"tuning: jit_cache_dir is an absolute path ('': no disk cache), got "
                                  f"{self.jit_cache_dir!r}")
        if self.contention_stall_ratio < 1:
            raise ParamValueError(f"tuning: contention_stall_ratio must be >= 1, got {self.contention_stall_ratio}")
        if self.cache_size < 1:
            raise ParamValueError(f"tuning: cache_size must be >= 1 (signatures kept compiled), got {self.cache_size}")

    def describe(self) -> str:
        """One line per setting: name, value, what it means (and its environment variable)."""
        rows = []
        for f in fields(self):
            env = f" (env {f.metadata['env']})" if f.metadata["env"] else ""
            rows.append(f"{f.name:<32} {getattr(self, f.name)!s:<10} {f.metadata['doc']}{env}")
        return "\n".join(rows)


DEFAULTS = {f.name: f.default for f in fields(Tuning)}
ENVIRONMENT = {f.metadata["env"].split()[0]: f.name for f in fields(Tuning)
               if f.metadata["env"] and "=" not in f.metadata["env"]}


def _parse(name: str, raw: str, default):
    """An environment variable's text as its setting's type; a named error for anything else."""
    if isinstance(default, str):  # (a path; 0 / off: none)
        return "" if raw.lower() in ("0", "off", "false", "no", "none") else os.path.expanduser(raw)
    if isinstance(default, bool):
        if raw.lower() in ("0", "false", "off", "no"):
            return False
        if raw.lower() in ("1", "true", "on", "yes"):
            return True
        raise ParamValueError(f"{name} is 0 or 1 (off or on; also false/true, off/on, no/yes), got {raw!r}; "
                              "fix or unset it")
    try:
        value = int(raw, 0)  # 123, 0x7f, 1_000
    except ValueError:
        try:
            value = float(raw)  # 5e8, 1.5
        except ValueError:
            value = -1.0
    if not (value >= 0 and value == value and value != float("inf")):
        raise ParamValueError(f"{name} must be a number >= 0 (such as 1000, 1e9 or 0x400), got {raw!r}; "
                              "fix or unset it")
    return int(value)


def _omp_threads(raw: str) -> int:
    """``OMP_NUM_THREADS``'s first count when it is a positive int, else 0 (the cores). Not lazyarray's
    own variable: OpenMP and BLAS read it too and accept forms (``4,2``) we do not, so no error."""
    value = raw.split(",")[0].strip()
    return int(value) if value.isdigit() and int(value) > 0 else 0


def _winograd(raw: str, values: dict) -> None:
    if raw.lower() in ("0", "off", "false", "no"):
        values["winograd"] = False
    elif raw in ("2", "4"):
        values["winograd_max_tile"] = int(raw)
    elif raw:
        raise ParamValueError(f"LAZYARRAY_WINOGRAD is 2 (F(2x2, 3x3) only), 4 (the default) or 0 (no "
                              f"Winograd), got {raw!r}; fix or unset it")


def _log(raw: str) -> bool:
    logs = {part.strip().lower() for part in raw.split(",") if part.strip()}
    unknown = logs - {"kernels"}
    if unknown:
        raise ParamValueError(f"LAZYARRAY_LOG names what to log, a comma-separated list of: kernels; got "
                              f"{sorted(unknown)}; fix or unset it")
    return "kernels" in logs


def _checked_value(name: str, field_name: str, raw: str, value):
    """``value`` when the setting takes it, else the setting's error naming the variable."""
    try:
        Tuning(**{**DEFAULTS, field_name: value})
    except ParamValueError as exc:
        raise ParamValueError(f"{name}={raw!r}: {exc}; fix or unset it") from None
    return value


def from_environment(environ=None) -> Tuning:
    """The defaults with the environment's settings applied (``ENVIRONMENT``); a value that is not
    one of the setting's raises ``ParamValueError`` naming the variable and the values it takes."""
    environ = os.environ if environ is None else environ
    values = dict(DEFAULTS)
    for name, field_name in ENVIRONMENT.items():
        raw = environ.get(name, "").strip()
        if not raw or name == "LAZYARRAY_WINOGRAD":
            continue
        if name == "OMP_NUM_THREADS":
            values[field_name] = _omp_threads(raw)
            continue
        value = _parse(name, raw, DEFAULTS[field_name])
        if name == "LAZYARRAY_PACK_BUDGET_MB":  # (MiB; 1.5 allowed)
            value = int(float(raw) * 2**20) if raw.replace(".", "", 1).isdigit() else value * 2**20
        values[field_name] = _checked_value(name, field_name, raw, value)
    values["log_kernels"] = _log(environ.get("LAZYARRAY_LOG", ""))
    _winograd(environ.get("LAZYARRAY_WINOGRAD", "").strip(), values)
    return Tuning(**values)


def from_environment_only(name: str, environ=None):
    """Setting ``name`` as the environment gives it now (read again), the other variables not looked at:
    ``jit.set_enabled(None)``'s "as ``LAZYARRAY_JIT`` says"."""
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if ENVIRONMENT.get(k) == name}
    return getattr(from_environment(env), name)


_DEFAULT = [from_environment()]  # the process-wide defaults (``la.config.x = ...`` replaces them)
_OVERRIDE: contextvars.ContextVar[Tuning | None] = contextvars.ContextVar("lazyarray_tuning", default=None)


def current() -> Tuning:
    """The settings in force in this thread / task."""
    t = _OVERRIDE.get()
    return _DEFAULT[0] if t is None else t


def _checked(names) -> None:
    for k in names:
        if k not in DEFAULTS:
            close = difflib.get_close_matches(k, DEFAULTS, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; settings: {', '.join(DEFAULTS)}"
            raise UnknownSettingError(f"tuning: unknown setting {k!r}{hint}")


@contextlib.contextmanager
def tuning(**settings):
    """Override tuning settings for the code inside (this thread / task).

    >>> import lazyarray as la
    >>> with la.tuning(winograd_max_tile=2, conv_region=False):
    ...     la.config.winograd_max_tile
    2
    """
    _checked(settings)
    token = _OVERRIDE.set(dataclasses.replace(current(), **settings))
    try:
        yield current()
    finally:
        _OVERRIDE.reset(token)


class Config:
    """``la.config``: the tuning settings in force (``la.config.winograd``), printable as a table;
    assigning one (``la.config.winograd = False``) changes the process-wide default."""

    __slots__ = ()

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        _checked([name])
        return getattr(current(), name)

    def __setattr__(self, name: str, value) -> None:
        _checked([name])
        _DEFAULT[0] = dataclasses.replace(_DEFAULT[0], **{name: value})

    def reset(self) -> None:
        """Back to the defaults the environment gave at import."""
        _DEFAULT[0] = from_environment()

    def settings(self) -> dict:
        """``name -> value`` of every setting in force."""
        return dataclasses.asdict(current())

    def __dir__(self):
        return list(DEFAULTS) + ["reset", "settings"]

    def __repr__(self) -> str:
        return "la.config:\n" + current().describe()


config = Config()
