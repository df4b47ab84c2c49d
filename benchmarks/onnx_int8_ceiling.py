"""Benchmark: how fast can ONNX Runtime int8 be against torch fp32 on this machine's kernels, and where does the
rest of its time go? Three measurements, for the issue's 2x target on AVX2 (run this script through
``benchmarks/onnx_avx2_speed.sh`` with ``ORT_AVX2_SCRIPT=benchmarks/onnx_int8_ceiling.py`` for the AVX2 path):

1. **GEMM alone.** One ``MatMul`` at each of the SST-2 fixture's weight shapes (384x384, 384x1536, 1536x384) on
   800 rows (a batch of 32 sentences of 25 sub-tokens): torch fp32 against the same graph quantized by
   ``quantize_dynamic`` (DynamicQuantizeLinear + MatMulInteger, fused by the session) and ONNX Runtime fp32.
   The int8 GEMM's speed-up bounds what a whole model gains from int8 matmuls.
2. **Where int8's time goes.** ONNX Runtime's profiler over the int8 build's pass on the dev set: the share of
   kernel time in integer matmuls against everything else (layer norms, GELU, softmax, attention's fp32
   matmuls, transposes), which int8 does not speed up.
3. **Other int8 graphs**, timed interleaved with torch fp32 on the dev set (as ``onnx_builds.py`` does), with
   their agreement: bertprobe's build (legacy export, eager attention); the model traced with its SDPA attention
   (bertprobe's export until 2026-11-27); the eager export fused by ONNX Runtime's transformer optimizer (Attention, SkipLayerNormalization, BiasGelu,
   EmbedLayerNormalization: what Optimum's O2 does) before quantizing; uint8 weights (MLAS's U8U8 kernel);
   and, where ``onnx_ir`` is installed, MatMulNBits (blockwise 8- and 4-bit weights, int8 compute).

Usage: python benchmarks/onnx_int8_ceiling.py [--threads 2] [--rounds 5] [--batch-size 32] [--limit 872]
Scratch graphs go to $ORT_CEILING_DIR (default /tmp/bertprobe-int8-ceiling).
"""

from __future__ import annotations

import argparse
import collections
import copy
import importlib.util
import json
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target
from onnx_builds import compare_builds, cpu_features

INTEGER_MATMULS = {"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulInteger", "QAttention", "MatMulNBits"}


def _per_call(fn: Callable[[], Any], calls: int = 200) -> float:
    for _ in range(20):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def gemm_alone(threads: int, scratch: Path) -> None:
    """Part 1: one MatMul per weight shape, torch fp32 against ONNX Runtime int8 and fp32."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(0)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.log_severity_level = threads, 3
    print("\n1. GEMM alone, 800 rows (median of 3 x 200 calls)")
    for k, n in ((384, 384), (384, 1536), (1536, 384)):
        weight = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "gemm",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", k])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", n])],
                                  [numpy_helper.from_array(weight, "w")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        fp32, int8 = scratch / f"gemm_{k}x{n}.onnx", scratch / f"gemm_{k}x{n}.int8.onnx"
        onnx.save(model, str(fp32))
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
        s8 = ort.InferenceSession(str(int8), options, providers=["CPUExecutionProvider"])
        s32 = ort.InferenceSession(str(fp32), options, providers=["CPUExecutionProvider"])
        x = rng.standard_normal((800, k)).astype(np.float32)
        xt, wt = torch.from_numpy(x), torch.from_numpy(weight)
        with torch.inference_mode():
            t_torch = statistics.median(_per_call(lambda: torch.matmul(xt, wt)) for _ in range(3))
        t_int8 = statistics.median(_per_call(lambda: s8.run(None, {"x": x})) for _ in range(3))
        t_fp32 = statistics.median(_per_call(lambda: s32.run(None, {"x": x})) for _ in range(3))
        print(f"   {k:>4} x {n:<4}  torch fp32 {t_torch * 1e3:6.3f} ms ({2 * 800 * k * n / t_torch / 1e9:4.0f} GFLOP/s)"
              f"   ORT int8 {t_int8 * 1e3:6.3f} ms ({t_torch / t_int8:4.2f}x)   ORT fp32 {t_fp32 * 1e3:6.3f} ms "
              f"({t_torch / t_fp32:4.2f}x)")


def int8_profile(graph: Path, target: Any, encoded: Any, batch_size: int, threads: int, scratch: Path) -> None:
    """Part 2: ONNX Runtime's profiler over one pass of the int8 build (after a warm-up pass)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.log_severity_level = threads, 3
    options.enable_profiling, options.profile_file_prefix = True, str(scratch / "profile")
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    order = sorted(range(len(encoded)), key=encoded.lengths.__getitem__)
    batches = [{k: v.numpy() for k, v in target.collate([encoded.rows[i] for i in order[s:s + batch_size]]).items()
                if k in names} for s in range(0, len(order), batch_size)]
    for feeds in batches:  # warm-up (in the profile too; the shares are what is read)
        session.run(None, feeds)
    for feeds in batches:
        session.run(None, feeds)
    events = json.loads(Path(session.end_profiling()).read_text())
    per_op: collections.Counter[str] = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            per_op[event["args"]["op_name"]] += event["dur"]
    total = sum(per_op.values()) or 1
    integer = sum(v for k, v in per_op.items() if k in INTEGER_MATMULS)
    print(f"\n2. Where the int8 build's kernel time goes ({graph.name}): integer matmuls {integer / total:.1%}, "
          f"everything else {1 - integer / total:.1%}")
    for op, micros in per_op.most_common(8):
        print(f"   {op:26} {micros / total:6.1%}")


def variant_graphs(base: Any, fp32: Path, scratch: Path) -> dict[str, Path]:
    """Part 3's graphs: name -> int8 ONNX file."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    from bertprobe.model import onnx as bo

    floats = {"bertprobe's export (eager attention)": fp32}
    sdpa = scratch / "sdpa.onnx"  # the model's own attention (SDPA), traced as bertprobe did before
    bo._export(base, bo._float_cpu_copy(base.model), base.encode(sst2_dev(base).examples[:2], cache=False).rows, sdpa)
    floats["SDPA-attention export"] = sdpa
    config = base.model.config
    fused = optimizer.optimize_model(str(fp32), model_type="bert", num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size, optimization_options=FusionOptions("bert"))
    counts = {k: v for k, v in fused.get_fused_operator_statistics().items() if v}
    fused.save_model_to_file(str(scratch / "eager_fused.onnx"))
    floats["eager export, fused"] = scratch / "eager_fused.onnx"
    print(f"   the transformer optimizer fused: {', '.join(f'{k} {v}' for k, v in counts.items())}")
    out: dict[str, Path] = {}
    contrib = {"DefaultTensorType": onnx.TensorProto.FLOAT}  # fused graphs' contrib ops defeat shape inference
    for i, (name, file) in enumerate(floats.items()):
        out[f"int8: {name}"] = scratch / f"v{i}.int8.onnx"
        quantize_dynamic(str(file), str(out[f"int8: {name}"]), weight_type=QuantType.QInt8, extra_options=contrib)
    out["int8, uint8 weights (U8U8)"] = scratch / "u8u8.onnx"
    quantize_dynamic(str(fp32), str(out["int8, uint8 weights (U8U8)"]), weight_type=QuantType.QUInt8)
    if importlib.util.find_spec("onnx_ir") is not None:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        for bits in (8, 4):
            quantizer = MatMulNBitsQuantizer(onnx.load(str(fp32)), bits=bits, block_size=32, is_symmetric=True,
                                             accuracy_level=4)
            quantizer.process()
            out[f"MatMulNBits {bits}-bit, blocks of 32"] = scratch / f"nbits{bits}.onnx"
            quantizer.model.save_model_to_file(str(out[f"MatMulNBits {bits}-bit, blocks of 32"]))
    else:
        print("   onnx_ir is not installed: MatMulNBits left out (pip install onnx_ir)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=872)
    args = parser.parse_args()
    require(SST2_MODEL, SST2_DEV)
    torch.set_num_threads(args.threads)
    scratch = Path(os.environ.get("ORT_CEILING_DIR", "/tmp/bertprobe-int8-ceiling"))
    scratch.mkdir(parents=True, exist_ok=True)
    from bertprobe.model.onnx import OnnxModel
    from bertprobe.model.variants import derive_variant

    print(cpu_features())
    if os.environ.get("ORT_AVX2_SHIM"):
        print("ONNX Runtime answered as an AVX2-only CPU (benchmarks/onnx_avx2_speed.sh)")
    print(f"threads {args.threads}; batch size {args.batch_size}")
    gemm_alone(args.threads, scratch)
    base = sst2_target()
    examples = sst2_dev(base).examples[: args.limit]
    encoded = base.encode(examples)
    ort_fp32 = derive_variant(base, replace(base.spec, runtime="onnx"))[0]
    ort_int8 = derive_variant(base, replace(base.spec, runtime="onnx", quantize="int8-dynamic"))[0]
    int8_profile(ort_int8.model.file, base, encoded, args.batch_size, args.threads, scratch)
    print("\n3. Other int8 graphs against torch fp32, interleaved passes over the dev set")
    made: list[tuple[str, Any]] = [("torch fp32", base)]
    for name, file in variant_graphs(base, ort_fp32.model.file, scratch).items():
        build = copy.copy(ort_fp32)
        build.model = OnnxModel(file, ort_fp32.model.config, torch.device("cpu"))
        made.append((name, build))
    compare_builds(made, examples, encoded, args.batch_size, args.rounds, indent="   ")

if __name__ == "__main__":
    main()
