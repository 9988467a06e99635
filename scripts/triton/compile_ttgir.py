"""Compiles the project's small Triton kernels to TTGIR for sm_90 without a
GPU: a pipelined TMA GEMM, a persistent TMA GEMM (grouped tile order,
runtime M, N, K), a persistent GEMM whose descriptors are made in the
kernel, and a warp-specialised attention forward.

Usage: python compile_ttgir.py OUT_DIR. Writes OUT_DIR/gemm.ttgir,
OUT_DIR/persistent_gemm.ttgir, OUT_DIR/device_desc_gemm.ttgir and
OUT_DIR/attention.ttgir (only what
compiles; prints what did not)."""

import sys
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def tma_gemm(a_desc, b_desc, c_desc, K: tl.constexpr, BM: tl.constexpr,
             BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=3):
        a = a_desc.load([pid_m * BM, k])
        b = b_desc.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@triton.jit
def persistent_gemm(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr,
                    GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=False):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in tl.range(0, k_tiles, num_stages=3):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([ki * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@triton.jit
def device_desc_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                     BN: tl.constexpr, BK: tl.constexpr,
                     NUM_SMS: tl.constexpr):
    # Descriptors made in the kernel from pointers, as the persistent
    # matmul tutorial's device-descriptor variant does.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BM, BN])
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS,
                            flatten=False):
        pid_m = tile_id // num_pid_n
        pid_n = tile_id % num_pid_n
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in tl.range(0, tl.cdiv(K, BK), num_stages=3):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([ki * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@triton.jit
def attention_fwd(q_desc, k_desc, v_desc, o_desc, N: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    pid = tl.program_id(0)
    q = q_desc.load([pid * BM, 0])
    m_i = tl.zeros((BM,), dtype=tl.float32) - float("inf")
    l_i = tl.zeros((BM,), dtype=tl.float32)
    acc = tl.zeros((BM, D), dtype=tl.float32)
    for start in tl.range(0, N, BN, num_stages=2, warp_specialize=True):
        k = k_desc.load([start, 0])
        s = tl.dot(q, k.T)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([start, 0])
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_new
    o_desc.store([pid * BM, 0], (acc / l_i[:, None]).to(tl.float16))


def compile_one(fn, signature, constexprs, num_warps):
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    target = GPUTarget("cuda", 90, 32)
    return triton.compile(src, target=target,
                          options={"num_warps": num_warps}).asm["ttgir"]


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    jobs = {
        "gemm": (tma_gemm, {
            "a_desc": "tensordesc<fp16[128, 64]>",
            "b_desc": "tensordesc<fp16[64, 128]>",
            "c_desc": "tensordesc<fp16[128, 128]>",
            "K": "constexpr", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
        }, {"K": 1024, "BM": 128, "BN": 128, "BK": 64}, 4),
        "persistent_gemm": (persistent_gemm, {
            "a_desc": "tensordesc<fp16[128, 64]>",
            "b_desc": "tensordesc<fp16[64, 256]>",
            "c_desc": "tensordesc<fp16[128, 256]>",
            "M": "i32", "N": "i32", "K": "i32",
            "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
            "GROUP_M": "constexpr", "NUM_SMS": "constexpr",
        }, {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "NUM_SMS": 132}, 8),
        "device_desc_gemm": (device_desc_gemm, {
            "a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16",
            "M": "i32", "N": "i32", "K": "i32",
            "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
            "NUM_SMS": "constexpr",
        }, {"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132}, 4),
        "attention": (attention_fwd, {
            "q_desc": "tensordesc<fp16[128, 128]>",
            "k_desc": "tensordesc<fp16[128, 128]>",
            "v_desc": "tensordesc<fp16[128, 128]>",
            "o_desc": "tensordesc<fp16[128, 128]>",
            "N": "constexpr", "BM": "constexpr", "BN": "constexpr", "D": "constexpr",
        }, {"N": 1024, "BM": 128, "BN": 128, "D": 128}, 8),
    }
    failed = 0
    for name, (fn, sig, cx, warps) in jobs.items():
        try:
            ttgir = compile_one(fn, sig, cx, warps)
        except Exception as e:  # report and go on: the caller says what ran
            print(f"{name}: did not compile: {type(e).__name__}: {e}".splitlines()[0])
            failed += 1
            continue
        (out / f"{name}.ttgir").write_text(ttgir)
        print(f"{name}: {len(ttgir)} bytes of TTGIR")
    sys.exit(1 if failed == len(jobs) else 0)


if __name__ == "__main__":
    main()
