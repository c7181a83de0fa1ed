"""ONNX's own node test cases for every operator ``la.onnx``'s import table claims: everything
that passes today keeps passing, and the known failures below are exactly the ones that fail.

The cases come from ``onnx/backend/test/data/node`` (or are generated in memory by the installed
onnx, which is how that directory is written); ``benchmarks/onnx_conformance.py`` prints the table
over all 1,884 cases.
"""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")

from lazyarray.onnx.backend import claimed_ops, node_cases, run_case  # noqa: E402

# Cases of claimed operators that fail today, by reason. A case that starts passing must leave this
# list (the test says which), and any other failing case is a regression.
KNOWN_FAILURES = {
    'bfloat16 has no NumPy dtype': [
        'test_attention_3d_causal_bf16', 'test_attention_3d_causal_bf16_expanded',
        'test_attention_4d_attn_mask_causal_bf16', 'test_attention_4d_attn_mask_causal_bf16_expanded',
        'test_attention_4d_causal_bf16', 'test_attention_4d_causal_bf16_expanded',
        'test_attention_4d_causal_padded_kv_bf16', 'test_attention_4d_causal_padded_kv_bf16_expanded',
        'test_attention_4d_padded_kv_bf16', 'test_attention_4d_padded_kv_bf16_expanded',
        'test_cast_BFLOAT16_to_FLOAT', 'test_cast_FLOAT_to_BFLOAT16', 'test_compress_bfloat16', 'test_castlike_BFLOAT16_to_FLOAT',
        'test_castlike_BFLOAT16_to_FLOAT_expanded', 'test_castlike_FLOAT_to_BFLOAT16',
        'test_castlike_FLOAT_to_BFLOAT16_expanded', 'test_celu_bfloat16', 'test_celu_bfloat16_expanded',
        'test_onehot_with_bfloat16_values', 'test_range_bfloat16_type_positive_delta',
        'test_range_bfloat16_type_positive_delta_expanded', 'test_unique_bfloat16_sorted_without_axis',
        'test_einsum_batch_matmul_bfloat16', 'test_einsum_sum_bfloat16', 'test_einsum_transpose_bfloat16',
        'test_reversesequence_bfloat16',
    ],
    'Unique along an axis (our unique_all flattens)': [
        'test_unique_sorted_with_axis', 'test_unique_sorted_with_axis_3d', 'test_unique_sorted_with_negative_axis',
    ],
    'training mode (inference graphs only)': [
        'test_batchnorm_epsilon_training_mode', 'test_batchnorm_example_training_mode', 'test_training_dropout',
        'test_training_dropout_default', 'test_training_dropout_default_mask', 'test_training_dropout_mask',
        'test_training_dropout_zero_ratio', 'test_training_dropout_zero_ratio_mask',
    ],
    'float8/float4/int4/int2 element types have no NumPy dtype': [
        'test_cast_FLOAT16_to_FLOAT4E2M1', 'test_cast_FLOAT16_to_FLOAT8E4M3FN', 'test_cast_FLOAT16_to_FLOAT8E4M3FNUZ',
        'test_cast_FLOAT16_to_FLOAT8E5M2', 'test_cast_FLOAT16_to_FLOAT8E5M2FNUZ', 'test_cast_FLOAT16_to_INT2',
        'test_cast_FLOAT16_to_INT4', 'test_cast_FLOAT16_to_UINT2', 'test_cast_FLOAT16_to_UINT4',
        'test_cast_FLOAT4E2M1_to_FLOAT', 'test_cast_FLOAT4E2M1_to_FLOAT16', 'test_cast_FLOAT8E4M3FNUZ_to_FLOAT',
        'test_cast_FLOAT8E4M3FNUZ_to_FLOAT16', 'test_cast_FLOAT8E4M3FN_to_FLOAT', 'test_cast_FLOAT8E4M3FN_to_FLOAT16',
        'test_cast_FLOAT8E5M2FNUZ_to_FLOAT', 'test_cast_FLOAT8E5M2FNUZ_to_FLOAT16', 'test_cast_FLOAT8E5M2_to_FLOAT',
        'test_cast_FLOAT8E5M2_to_FLOAT16', 'test_cast_FLOAT_to_FLOAT4E2M1', 'test_cast_FLOAT_to_FLOAT8E4M3FN',
        'test_cast_FLOAT_to_FLOAT8E4M3FNUZ', 'test_cast_FLOAT_to_FLOAT8E5M2', 'test_cast_FLOAT_to_FLOAT8E5M2FNUZ',
        'test_cast_FLOAT_to_INT2', 'test_cast_FLOAT_to_INT4', 'test_cast_FLOAT_to_UINT2', 'test_cast_FLOAT_to_UINT4',
        'test_cast_INT2_to_FLOAT', 'test_cast_INT2_to_FLOAT16', 'test_cast_INT2_to_INT8', 'test_cast_INT4_to_FLOAT',
        'test_cast_INT4_to_FLOAT16', 'test_cast_INT4_to_INT8', 'test_cast_UINT2_to_FLOAT',
        'test_cast_UINT2_to_FLOAT16', 'test_cast_UINT2_to_UINT8', 'test_cast_UINT4_to_FLOAT',
        'test_cast_UINT4_to_FLOAT16', 'test_cast_UINT4_to_UINT8', 'test_cast_e8m0_FLOAT16_to_FLOAT8E8M0',
        'test_cast_e8m0_FLOAT8E8M0_to_FLOAT', 'test_cast_e8m0_FLOAT8E8M0_to_FLOAT16',
        'test_cast_e8m0_FLOAT_to_FLOAT8E8M0', 'test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN',
        'test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ', 'test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2',
        'test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ', 'test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN',
        'test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ', 'test_cast_no_saturate_FLOAT_to_FLOAT8E5M2',
        'test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ', 'test_castlike_FLOAT16_to_FLOAT4E2M1',
        'test_castlike_FLOAT16_to_FLOAT4E2M1_expanded', 'test_castlike_FLOAT16_to_FLOAT8E4M3FN',
        'test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ', 'test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded',
        'test_castlike_FLOAT16_to_FLOAT8E4M3FN_expanded', 'test_castlike_FLOAT16_to_FLOAT8E5M2',
        'test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ', 'test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded',
        'test_castlike_FLOAT16_to_FLOAT8E5M2_expanded', 'test_castlike_FLOAT16_to_INT2',
        'test_castlike_FLOAT16_to_INT2_expanded', 'test_castlike_FLOAT16_to_INT4',
        'test_castlike_FLOAT16_to_INT4_expanded', 'test_castlike_FLOAT16_to_UINT2',
        'test_castlike_FLOAT16_to_UINT2_expanded', 'test_castlike_FLOAT16_to_UINT4',
        'test_castlike_FLOAT16_to_UINT4_expanded', 'test_castlike_FLOAT4E2M1_to_FLOAT',
        'test_castlike_FLOAT4E2M1_to_FLOAT16', 'test_castlike_FLOAT4E2M1_to_FLOAT16_expanded',
        'test_castlike_FLOAT4E2M1_to_FLOAT_expanded', 'test_castlike_FLOAT8E4M3FNUZ_to_FLOAT',
        'test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16', 'test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded',
        'test_castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded', 'test_castlike_FLOAT8E4M3FN_to_FLOAT',
        'test_castlike_FLOAT8E4M3FN_to_FLOAT16', 'test_castlike_FLOAT8E4M3FN_to_FLOAT16_expanded',
        'test_castlike_FLOAT8E4M3FN_to_FLOAT_expanded', 'test_castlike_FLOAT8E5M2FNUZ_to_FLOAT',
        'test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16', 'test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded',
        'test_castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded', 'test_castlike_FLOAT8E5M2_to_FLOAT',
        'test_castlike_FLOAT8E5M2_to_FLOAT16', 'test_castlike_FLOAT8E5M2_to_FLOAT16_expanded',
        'test_castlike_FLOAT8E5M2_to_FLOAT_expanded', 'test_castlike_FLOAT_to_FLOAT4E2M1',
        'test_castlike_FLOAT_to_FLOAT4E2M1_expanded', 'test_castlike_FLOAT_to_FLOAT8E4M3FN',
        'test_castlike_FLOAT_to_FLOAT8E4M3FNUZ', 'test_castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded',
        'test_castlike_FLOAT_to_FLOAT8E4M3FN_expanded', 'test_castlike_FLOAT_to_FLOAT8E5M2',
        'test_castlike_FLOAT_to_FLOAT8E5M2FNUZ', 'test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded',
        'test_castlike_FLOAT_to_FLOAT8E5M2_expanded', 'test_castlike_FLOAT_to_INT2',
        'test_castlike_FLOAT_to_INT2_expanded', 'test_castlike_FLOAT_to_INT4', 'test_castlike_FLOAT_to_INT4_expanded',
        'test_castlike_FLOAT_to_UINT2', 'test_castlike_FLOAT_to_UINT2_expanded', 'test_castlike_FLOAT_to_UINT4',
        'test_castlike_FLOAT_to_UINT4_expanded', 'test_castlike_INT2_to_FLOAT', 'test_castlike_INT2_to_FLOAT16',
        'test_castlike_INT2_to_FLOAT16_expanded', 'test_castlike_INT2_to_FLOAT_expanded',
        'test_castlike_INT2_to_INT8', 'test_castlike_INT2_to_INT8_expanded', 'test_castlike_INT4_to_FLOAT',
        'test_castlike_INT4_to_FLOAT16', 'test_castlike_INT4_to_FLOAT16_expanded',
        'test_castlike_INT4_to_FLOAT_expanded', 'test_castlike_INT4_to_INT8', 'test_castlike_INT4_to_INT8_expanded',
        'test_castlike_UINT2_to_FLOAT', 'test_castlike_UINT2_to_FLOAT16', 'test_castlike_UINT2_to_FLOAT16_expanded',
        'test_castlike_UINT2_to_FLOAT_expanded', 'test_castlike_UINT2_to_UINT8',
        'test_castlike_UINT2_to_UINT8_expanded', 'test_castlike_UINT4_to_FLOAT', 'test_castlike_UINT4_to_FLOAT16',
        'test_castlike_UINT4_to_FLOAT16_expanded', 'test_castlike_UINT4_to_FLOAT_expanded',
        'test_castlike_UINT4_to_UINT8', 'test_castlike_UINT4_to_UINT8_expanded',
        'test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN', 'test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ',
        'test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded',
        'test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded',
        'test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2', 'test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ',
        'test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded',
        'test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded', 'test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN',
        'test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ',
        'test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded',
        'test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded', 'test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2',
        'test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ',
        'test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded',
        'test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded', 'test_dequantizelinear_e4m3fn',
        'test_dequantizelinear_e4m3fn_float16', 'test_dequantizelinear_e4m3fn_zero_point',
        'test_dequantizelinear_e5m2', 'test_dequantizelinear_float4e2m1', 'test_dequantizelinear_int2',
        'test_dequantizelinear_int4', 'test_dequantizelinear_uint2', 'test_dequantizelinear_uint4',
        'test_quantizelinear_e4m3fn', 'test_quantizelinear_e5m2', 'test_quantizelinear_float4e2m1',
        'test_quantizelinear_int2', 'test_quantizelinear_int4', 'test_quantizelinear_uint2',
        'test_quantizelinear_uint4',
    ],
    'string tensors are not supported': [
        'test_equal_string', 'test_equal_string_broadcast',
    ],
    'sequence / optional values': [
        'test_identity_opt', 'test_identity_sequence',
    ],
    "MaxPool's Indices output": [
        'test_maxpool_with_argmax_2d_precomputed_pads', 'test_maxpool_with_argmax_2d_precomputed_strides',
    ],
    'Scan-8 (batched; onnx.version_converter drops its batch axis from the inputs, so it is refused)': [
        'test_scan_sum',
    ],
    'Slice bounds computed in a Loop body from the iteration count (our slices take fixed bounds)': [
        'test_loop11',
    ],
    'control flow over sequence / optional values': [
        'test_if_opt', 'test_if_seq', 'test_loop13_seq', 'test_loop16_seq_none',
    ],
    'Resize antialias': [
        'test_resize_downsample_scales_cubic_antialias', 'test_resize_downsample_scales_linear_antialias',
        'test_resize_downsample_sizes_cubic_antialias', 'test_resize_downsample_sizes_linear_antialias',
    ],
    'Resize tf_crop_and_resize': [
        'test_resize_tf_crop_and_resize', 'test_resize_tf_crop_and_resize_axes_2_3',
        'test_resize_tf_crop_and_resize_axes_3_2', 'test_resize_tf_crop_and_resize_extrapolation_value',
    ],
}


def test_every_case_of_a_claimed_operator_passes_unless_known_to_fail():
    known = {name: why for why, names in KNOWN_FAILURES.items() for name in names}
    claimed = set(claimed_ops())
    cases = [c for c in node_cases() if c.op in claimed]
    assert len(cases) > 1000  # the suite is there: 1,501 cases of claimed operators with onnx 1.23
    new_failures, now_passing = [], []
    for case in cases:
        why = run_case(case)
        if why is not None and case.name not in known:
            new_failures.append(f"{case.name} ({case.op}): {why}")
        elif why is None and case.name in known:
            now_passing.append(f"{case.name} (listed as: {known[case.name]})")
    assert not new_failures, f"{len(new_failures)} new failure(s):\n" + "\n".join(new_failures)
    assert not now_passing, ("these cases pass now; remove them from KNOWN_FAILURES:\n" + "\n".join(now_passing))


def test_the_known_failures_are_cases_of_claimed_operators():
    by_name = {c.name: c.op for c in node_cases()}
    claimed = set(claimed_ops())
    listed = [n for names in KNOWN_FAILURES.values() for n in names]
    assert len(listed) == len(set(listed))
    stale = [n for n in listed if by_name.get(n) not in claimed]
    # with another onnx version, case names may change: say which, rather than passing vacuously
    assert not stale, f"not cases of claimed operators in this onnx ({onnx.__version__}): {stale}"


def test_cases_are_grouped_by_the_operator_they_test():
    ops = {c.name: c.op for c in node_cases()}
    assert len(ops) > 1500  # 1,884 with onnx 1.23
    assert ops["test_gemm_default_no_bias"] == "Gemm"
    assert ops["test_softmax_axis_0_expanded"] == "Softmax"
