"""Compiles the project's small Triton kernels to TTGIR for sm_90 without a
GPU: a pipelined TMA GEMM (3 and 5 stages), a persistent TMA GEMM (grouped tile order,
runtime M, N, K), a persistent GEMM whose descriptors are made in the
kernel, a warp-specialised attention forward, and four kernels written the
way Triton's tutorials write them, through pointers: a GEMM whose loads
Triton pipelines into cp.async copies (grouped order, masked K), its
persistent form (a flattened tile loop), the fused-attention forward
(causal, host descriptors, no warp specialisation), a vector add, a row
softmax (persistent, pipelined) and a layer-norm forward; and five that
read memory the launch file describes or use atomics: a grouped GEMM
through pointers and through descriptors made over addresses it loads, a
layer-norm backward with an atomic spin lock, a dropout with Philox
random numbers, and a vector add with programmatic dependent launch; and
the persistent TMA GEMM of Triton's persistent-matmul tutorial for Hopper,
in FP16 with a split epilogue and in FP8; and the causal fused-attention
backward through pointers (5 stages).

The pointer kernels' pointer and integer arguments are marked divisible
by 16, as Triton's launcher marks them for aligned tensors and sizes
(without the mark the compiler neither vectorises nor pipelines the
loads).

Usage: python compile_ttgir.py OUT_DIR [NAME...]. Writes OUT_DIR/NAME.ttgir
for each kernel, or only the NAMEs given (only what compiles; prints what
did not) and prints the registers
per thread ptxas gave it and the shared memory Triton laid out for it (a
launch file's `regs` and `smem`)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


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
def deep_tma_gemm(a_desc, b_desc, c_desc, K: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr, BK: tl.constexpr):
    # tma_gemm with a 5-stage ring: deep enough that the loads, issued one
    # iteration later than a warp-specialised producer would, still arrive
    # in time.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=5):
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
                     NUM_SMS: tl.constexpr, WS: tl.constexpr):
    # Descriptors made in the kernel from pointers, as the persistent
    # matmul tutorial's device-descriptor variant does. With WS the tile
    # loop is warp-specialised: on Hopper, Triton splits it into consumer
    # partitions that ask for more registers (setmaxnreg) than the
    # launch's count and make their own descriptor of C.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BM, BN])
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS,
                            flatten=False, warp_specialize=WS):
        pid_m = tile_id // num_pid_n
        pid_n = tile_id % num_pid_n
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in tl.range(0, tl.cdiv(K, BK), num_stages=3):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([ki * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@triton.jit
def flag_signal(flags, out):
    # Program 1 stores, then sets a flag; program 0 spins on the flag with
    # a volatile load before it stores, as split-K and stream-K kernels
    # wait for a peer's partial sums.
    if tl.program_id(0) == 0:
        while tl.load(flags, volatile=True) != 1:
            pass
        tl.store(out, 1)
    else:
        tl.store(out + 1, 2)
        tl.atomic_xchg(flags, 1)


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


@triton.jit
def ptr_gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             GROUP_M: tl.constexpr):
    # Row-major A, B and C through pointers, tiles in groups of GROUP_M
    # rows of tiles, the K tail masked.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        left = K - k * BK
        x = tl.load(a, mask=rk[None, :] < left, other=0.0)
        y = tl.load(b, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(x, y, acc)
        a += BK
        b += BK * stride_bk
    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    c = c_ptr + cm[:, None] * stride_cm + cn[None, :]
    tl.store(c, acc.to(tl.float16), mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def _tile_of(tile, per_group, tiles_m, GROUP_M: tl.constexpr):
    first_m = (tile // per_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    return first_m + tile % rows, (tile % per_group) // rows


@triton.jit
def persistent_ptr_gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk,
                        stride_cm, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, GROUP_M: tl.constexpr,
                        NUM_SMS: tl.constexpr):
    # The persistent tutorial GEMM through pointers: one program per SM
    # walks its tiles in a flattened loop (Triton computes the next tile
    # while the last k-steps run, past the end too, with its loads masked
    # off), rows and columns past the tensor clamped to 0.
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    per_group = GROUP_M * tiles_n
    tile_c = tl.program_id(0) - NUM_SMS
    rk0 = tl.arange(0, BK)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_SMS,
                         flatten=True):
        pid_m, pid_n = _tile_of(tile, per_group, tiles_m, GROUP_M)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rm = tl.max_contiguous(tl.multiple_of(tl.where(rm < M, rm, 0), BM), BM)
        rn = tl.max_contiguous(tl.multiple_of(tl.where(rn < N, rn, 0), BN), BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            rk = ki * BK + rk0
            x = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :],
                        mask=rk0[None, :] < K - ki * BK, other=0.0)
            y = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :],
                        mask=rk0[:, None] < K - ki * BK, other=0.0)
            acc = tl.dot(x, y, acc)
        tile_c += NUM_SMS
        pm, pn = _tile_of(tile_c, per_group, tiles_m, GROUP_M)
        cm = pm * BM + tl.arange(0, BM)
        cn = pn * BN + tl.arange(0, BN)
        tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :],
                 acc.to(tl.float16),
                 mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def _attn_blocks(acc, l_i, m_i, q, desc_k, desc_v, off_kv, start_m, qk_scale,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 STAGE: tl.constexpr, offs_m, offs_n):
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    else:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
    for start_n in tl.range(lo, hi, BLOCK_N):
        k = desc_k.load([off_kv + start_n, 0]).T
        qk = tl.dot(q, k)
        if STAGE == 2:
            keep = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(keep, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([off_kv + start_n, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    return acc, l_i, m_i

@triton.jit
def causal_attention(sm_scale, M, desc_q, desc_k, desc_v, desc_o, N_CTX,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    # The fused-attention tutorial's forward on Hopper: host descriptors, no
    # warp specialisation, the blocks before the diagonal then the
    # diagonal's masked blocks (STAGE 3 is causal).
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_q = off_hz * N_CTX + start_m * BLOCK_M
    off_kv = off_hz * N_CTX
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([off_q, 0])
    if STAGE & 1:
        acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, desc_k, desc_v, off_kv,
                                     start_m, qk_scale, BLOCK_M, BLOCK_N,
                                     4 - STAGE, offs_m, offs_n)
    if STAGE & 2:
        acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, desc_k, desc_v, off_kv,
                                     start_m, qk_scale, BLOCK_M, BLOCK_N, 2,
                                     offs_m, offs_n)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([off_q, 0], acc.to(tl.float16))


@triton.jit
def embedding(ids_ptr, table_ptr, out_ptr, D: tl.constexpr, BLOCK: tl.constexpr):
    # An embedding lookup: each program gathers BLOCK rows of D elements
    # from the table at the token ids it loads, and stores them in order.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.load(ids_ptr + offs)
    cols = tl.arange(0, D)
    x = tl.load(table_ptr + rows[:, None] * D + cols[None, :])
    tl.store(out_ptr + offs[:, None] * D + cols[None, :], x)


@triton.jit
def moe_gemm(a_ptr, b_ptr, c_ptr, token_ids_ptr, expert_ids_ptr, K, num_valid_tokens,
             stride_am, stride_be, stride_bk, stride_cm, BM: tl.constexpr,
             BN: tl.constexpr, BK: tl.constexpr, TOP_K: tl.constexpr):
    # A mixture-of-experts GEMM as fused MoE kernels write it: block
    # pid_m's BM rows are tokens gathered by id (each token TOP_K times),
    # multiplied by the weights of the block's expert, loaded by id.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    tokens = tl.load(token_ids_ptr + pid_m * BM + tl.arange(0, BM))
    valid = tokens < num_valid_tokens
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + (tokens[:, None] // TOP_K * stride_am + offs_k[None, :])
    expert = tl.load(expert_ids_ptr + pid_m)
    b_ptrs = b_ptr + expert * stride_be + (offs_k[:, None] * stride_bk + offs_n[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=valid[:, None], other=0.0)
        acc += tl.dot(a, tl.load(b_ptrs))
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    c_ptrs = c_ptr + stride_cm * tokens[:, None] + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=valid[:, None])


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    x = tl.load(x_ptr + offs, mask=keep)
    y = tl.load(y_ptr + offs, mask=keep)
    tl.store(out_ptr + offs, x + y, mask=keep)


@triton.jit
def row_softmax(out_ptr, in_ptr, in_stride, out_stride, rows, cols,
                BLOCK: tl.constexpr, STAGES: tl.constexpr):
    # Persistent over rows; Triton pipelines each row's load.
    for r in tl.range(tl.program_id(0), rows, tl.num_programs(0),
                      num_stages=STAGES):
        offs = tl.arange(0, BLOCK)
        keep = offs < cols
        x = tl.load(in_ptr + r * in_stride + offs, mask=keep,
                    other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + r * out_stride + offs, e / tl.sum(e, axis=0),
                 mask=keep)


@triton.jit
def layer_norm(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, N,
               eps, BLOCK: tl.constexpr):
    # One row per program: a pass for the mean, one for the variance, one
    # to normalise.
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        s += tl.load(x_ptr + cols, mask=cols < N, other=0.).to(tl.float32)
    mean = tl.sum(s, axis=0) / N
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols, mask=cols < N, other=0.).to(tl.float32)
        d = tl.where(cols < N, x - mean, 0.)
        s += d * d
    rstd = 1 / tl.sqrt(tl.sum(s, axis=0) / N + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        keep = cols < N
        w = tl.load(w_ptr + cols, mask=keep)
        b = tl.load(b_ptr + cols, mask=keep)
        x = tl.load(x_ptr + cols, mask=keep, other=0.).to(tl.float32)
        tl.store(y_ptr + cols, (x - mean) * rstd * w + b, mask=keep)


# Kernels that read memory the launch describes: sizes and matrix addresses
# loaded from device tables (a grouped GEMM, through pointers and through
# descriptors made over the loaded addresses), a spin lock and a counter
# (the layer-norm backward's partial weight gradients, accumulated under an
# atomic_cas lock), Philox random numbers (dropout) and programmatic
# dependent launch.


@triton.jit
def _group(sizes, g, BM: tl.constexpr, BN: tl.constexpr):
    # Group g's M, N and K from the table, its tiles along N and in all.
    m = tl.load(sizes + g * 3)
    n = tl.load(sizes + g * 3 + 1)
    k = tl.load(sizes + g * 3 + 2)
    tiles_n = tl.cdiv(n, BN)
    return m, n, k, tiles_n, tl.cdiv(m, BM) * tiles_n


@triton.jit
def _matrices(a_ptrs, b_ptrs, c_ptrs, g):
    # Group g's A, B and C from the tables of addresses.
    a = tl.load(a_ptrs + g).to(tl.pointer_type(tl.float16))
    b = tl.load(b_ptrs + g).to(tl.pointer_type(tl.float16))
    c = tl.load(c_ptrs + g).to(tl.pointer_type(tl.float16))
    return a, b, c


@triton.jit
def grouped_gemm(a_ptrs, b_ptrs, c_ptrs, sizes, lds, groups,
                 NUM_SM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tile = tl.program_id(0)
    end = 0
    for g in range(groups):
        m, n, k, tiles_n, count = _group(sizes, g, BM, BN)
        while tile >= end and tile < end + count:
            lda = tl.load(lds + g * 3)
            ldb = tl.load(lds + g * 3 + 1)
            ldc = tl.load(lds + g * 3 + 2)
            a, b, c = _matrices(a_ptrs, b_ptrs, c_ptrs, g)
            t = tile - end
            tm = t // tiles_n
            tn = t % tiles_n
            rm = tm * BM + tl.arange(0, BM)
            rn = tn * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            pa = a + rm[:, None] * lda + rk[None, :]
            pb = b + rk[:, None] * ldb + rn[None, :]
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BK)):
                tl.multiple_of(pa, [16, 16])
                tl.multiple_of(pb, [16, 16])
                acc += tl.dot(tl.load(pa), tl.load(pb))
                pa += BK
                pb += BK * ldb
            pc = c + ldc * rm[:, None] + rn[None, :]
            tl.store(pc, acc.to(tl.float16))
            tile += NUM_SM
        end = end + count

@triton.jit
def grouped_tma_gemm(a_ptrs, b_ptrs, c_ptrs, sizes, groups,
                     NUM_SM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tile = tl.program_id(0)
    end = 0
    for g in range(groups):
        m, n, k, tiles_n, count = _group(sizes, g, BM, BN)
        if tile >= end and tile < end + count:
            a, b, c = _matrices(a_ptrs, b_ptrs, c_ptrs, g)
            ad = tl.make_tensor_descriptor(a, shape=[m, k], strides=[k, 1], block_shape=[BM, BK])
            bd = tl.make_tensor_descriptor(b, shape=[n, k], strides=[k, 1], block_shape=[BN, BK])
            cd = tl.make_tensor_descriptor(c, shape=[m, n], strides=[n, 1], block_shape=[BM, BN])
            while tile >= end and tile < end + count:
                t = tile - end
                tm = t // tiles_n
                tn = t % tiles_n
                acc = tl.zeros((BM, BN), dtype=tl.float32)
                for kk in range(0, tl.cdiv(k, BK)):
                    x = ad.load([tm * BM, kk * BK])
                    y = bd.load([tn * BN, kk * BK])
                    acc += tl.dot(x, y.T)
                cd.store([tm * BM, tn * BN], acc.to(tl.float16))
                tile += NUM_SM
        end = end + count

@triton.jit
def layer_norm_bwd(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
              GROUP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP
    Lock += lock_id
    Count = Lock + GROUP
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    pdw = (dy * xhat).to(w.dtype)
    pdb = (dy).to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        pdw += tl.load(DW, mask=mask)
        pdb += tl.load(DB, mask=mask)
    tl.store(DW, pdw, mask=mask)
    tl.store(DB, pdb, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)

@triton.jit
def dropout(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    r = tl.rand(seed, offs)
    keep = r > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


@triton.jit
def pdl_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    gdc_wait()
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    gdc_launch_dependents()
    tl.store(out_ptr + offs, x + y, mask=mask)


# The persistent TMA GEMM with a host descriptor for B^T, as Triton's
# persistent-matmul tutorial writes it for Hopper: FP16 with its epilogue
# stored in two halves (reshape, permute, split), or FP8 (e4m3) throughout.
@triton.jit
def subtile_gemm(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
                 SUBTILE: tl.constexpr, FP8: tl.constexpr):
    dtype = tl.float8e4nv if FP8 else tl.float16
    start = tl.program_id(0)
    pm = tl.cdiv(M, BM)
    pn = tl.cdiv(N, BN)
    kt = tl.cdiv(K, BK)
    tiles = pm * pn
    per_group = GROUP_M * pn
    for tile in tl.range(start, tiles, NUM_SMS, flatten=True):
        m, n = _tile_of(tile, per_group, pm, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(kt):
            a = a_desc.load([m * BM, ki * BK])
            b = b_desc.load([n * BN, ki * BK])
            acc = tl.dot(a, b.T, acc)
        if SUBTILE:
            acc = tl.reshape(acc, (BM, 2, BN // 2))
            acc = tl.permute(acc, (0, 2, 1))
            c0, c1 = tl.split(acc)
            c_desc.store([m * BM, n * BN], c0.to(dtype))
            c_desc.store([m * BM, n * BN + BN // 2], c1.to(dtype))
        else:
            c_desc.store([m * BM, n * BN], acc.to(dtype))


# The fused-attention backward as Triton's tutorial writes it for Hopper:
# per CTA, dK and dV of a block of keys (the masked diagonal blocks in
# halves, then the rest), then dQ of a block of queries; pointer loads,
# five dots per step, causal.
@triton.jit
def _dkdv(dk, dv, Q, k, v, DO, M, D, stride_tok, n0, m0, steps, BM: tl.constexpr, BN: tl.constexpr,
          HD: tl.constexpr, CAUSAL: tl.constexpr):
    rows = m0 + tl.arange(0, BM)
    cols = n0 + tl.arange(0, BN)
    d = tl.arange(0, HD)
    qT_p = Q + rows[None, :] * stride_tok + d[:, None]
    do_p = DO + rows[:, None] * stride_tok + d[None, :]
    cur = m0
    for _ in range(steps):
        qT = tl.load(qT_p)
        r = cur + tl.arange(0, BM)
        m = tl.load(M + r)
        pT = tl.math.exp2(tl.dot(k, qT) - m[None, :])
        if CAUSAL:
            pT = tl.where(r[None, :] >= cols[:, None], pT, 0.0)
        do = tl.load(do_p)
        dv += tl.dot(pT.to(tl.float16), do)
        delta = tl.load(D + r)
        dpT = tl.dot(v, tl.trans(do)).to(tl.float32)
        dsT = (pT * (dpT - delta[None, :])).to(tl.float16)
        dk += tl.dot(dsT, tl.trans(qT))
        cur += BM
        qT_p += BM * stride_tok
        do_p += BM * stride_tok
    return dk, dv

@triton.jit
def _dq(dq, q, K, V, do, m, D, stride_tok, m0, n0, steps, BM: tl.constexpr, BN: tl.constexpr,
        HD: tl.constexpr, CAUSAL: tl.constexpr):
    rows = m0 + tl.arange(0, BM)
    cols = n0 + tl.arange(0, BN)
    d = tl.arange(0, HD)
    kT_p = K + cols[None, :] * stride_tok + d[:, None]
    vT_p = V + cols[None, :] * stride_tok + d[:, None]
    delta = tl.load(D + rows)
    cur = n0
    for _ in range(steps):
        kT = tl.load(kT_p)
        vT = tl.load(vT_p)
        p = tl.math.exp2(tl.dot(q, kT) - m)
        if CAUSAL:
            c = cur + tl.arange(0, BN)
            p = tl.where(rows[:, None] >= c[None, :], p, 0.0)
        dp = tl.dot(do, vT).to(tl.float32)
        ds = (p * (dp - delta[:, None])).to(tl.float16)
        dq += tl.dot(ds, tl.trans(kT))
        cur += BN
        kT_p += BN * stride_tok
        vT_p += BN * stride_tok
    return dq

@triton.jit
def attention_bwd(Q, K, V, sm_scale, DO, DQ, DK, DV, M, D, stride_z, stride_h, stride_tok, H, N_CTX,
                  BM1: tl.constexpr, BN1: tl.constexpr, BM2: tl.constexpr, BN2: tl.constexpr,
                  SLICE: tl.constexpr, HD: tl.constexpr):
    bh = tl.program_id(2)
    row0 = (bh * N_CTX).to(tl.int64)
    adj = (stride_h * (bh % H) + stride_z * (bh // H)).to(tl.int64)
    pid = tl.program_id(0)
    Q += adj
    K += adj
    V += adj
    DO += adj
    DQ += adj
    DK += adj
    DV += adj
    M += row0
    D += row0
    d = tl.arange(0, HD)
    n0 = pid * BN1
    cols = n0 + tl.arange(0, BN1)
    dv = tl.zeros([BN1, HD], dtype=tl.float32)
    dk = tl.zeros([BN1, HD], dtype=tl.float32)
    k = tl.load(K + cols[:, None] * stride_tok + d[None, :])
    v = tl.load(V + cols[:, None] * stride_tok + d[None, :])
    SM: tl.constexpr = BM1 // SLICE
    steps = BN1 // SM
    dk, dv = _dkdv(dk, dv, Q, k, v, DO, M, D, stride_tok, n0, n0, steps, SM, BN1, HD, True)
    m0 = n0 + steps * SM
    dk, dv = _dkdv(dk, dv, Q, k, v, DO, M, D, stride_tok, n0, m0, (N_CTX - m0) // BM1, BM1, BN1, HD, False)
    tl.store(DV + cols[:, None] * stride_tok + d[None, :], dv)
    tl.store(DK + cols[:, None] * stride_tok + d[None, :], dk * sm_scale)
    m0 = pid * BM2
    end = m0 + BM2
    SN: tl.constexpr = BN2 // SLICE
    rows = m0 + tl.arange(0, BM2)
    q = tl.load(Q + rows[:, None] * stride_tok + d[None, :])
    do = tl.load(DO + rows[:, None] * stride_tok + d[None, :])
    m = tl.load(M + rows)[:, None]
    dq = tl.zeros([BM2, HD], dtype=tl.float32)
    steps = BM2 // SN
    dq = _dq(dq, q, K, V, do, m, D, stride_tok, m0, end - steps * SN, steps, BM2, SN, HD, True)
    end -= steps * SN
    steps = end // BN2
    dq = _dq(dq, q, K, V, do, m, D, stride_tok, m0, end - steps * BN2, steps, BM2, BN2, HD, False)
    tl.store(DQ + rows[:, None] * stride_tok + d[None, :], dq * 0.6931471824645996)


@triton.jit
def layer_norm_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N,
                    BM: tl.constexpr, BN: tl.constexpr):
    # The backward's second kernel: each program sums BN columns of the
    # GROUP partial rows layer_norm_bwd left, BM rows at a time.
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    acc_w = tl.zeros((BM, BN), dtype=tl.float32)
    acc_b = tl.zeros((BM, BN), dtype=tl.float32)
    for start in range(0, M, BM):
        rows = start + tl.arange(0, BM)
        inside = (rows[:, None] < M) & (cols[None, :] < N)
        at = rows[:, None] * N + cols[None, :]
        acc_w += tl.load(DW + at, mask=inside, other=0.)
        acc_b += tl.load(DB + at, mask=inside, other=0.)
    tl.store(FINAL_DW + cols, tl.sum(acc_w, axis=0), mask=cols < N)
    tl.store(FINAL_DB + cols, tl.sum(acc_b, axis=0), mask=cols < N)

@triton.jit
def attention_bwd_pre(O, DO, Delta, N_CTX, BM: tl.constexpr, HD: tl.constexpr):
    # The attention backward's first kernel: delta = rowsum(o * do) for
    # BM queries of one head.
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    head = tl.program_id(1)
    dims = tl.arange(0, HD)
    at = head * HD * N_CTX + rows[:, None] * HD + dims[None, :]
    o = tl.load(O + at)
    do = tl.load(DO + at).to(tl.float32)
    tl.store(Delta + head * N_CTX + rows, tl.sum(o * do, axis=1))


def registers(compiled):
    """Registers per thread ptxas gave the kernel (the wheel's cuobjdump
    reads them from the cubin; no GPU needed), or None."""
    tool = os.path.join(os.path.dirname(triton.__file__),
                        "backends", "nvidia", "bin", "cuobjdump")
    cubin = compiled.asm.get("cubin")
    if not cubin or not os.path.exists(tool):
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "-res-usage", f.name],
                             capture_output=True, text=True).stdout
    for word in out.split():
        if word.startswith("REG:"):
            return int(word[4:])
    return None


def compile_one(fn, signature, constexprs, num_warps, aligned=False, num_stages=None):
    # With `aligned`, integer and pointer arguments are divisible by 16, as
    # the launcher marks them for aligned tensors and sizes.
    attrs = {(i,): [["tt.divisibility", 16]]
             for i, ty in enumerate(signature.values())
             if aligned and (ty.startswith("*") or ty == "i32")}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs,
                    attrs=attrs)
    target = GPUTarget("cuda", 90, 32)
    options = {"num_warps": num_warps}
    if num_stages is not None:
        options["num_stages"] = num_stages
    return triton.compile(src, target=target, options=options)


def subtile_signature(dtype, bk):
    # subtile_gemm's arguments for 128 x 256 tiles of `dtype`, BK deep
    # (C stored in halves of 128 columns for 16-bit types).
    c_cols = 128 if dtype == "fp16" else 256
    sig = {"a_desc": f"tensordesc<{dtype}[128, {bk}]>",
           "b_desc": f"tensordesc<{dtype}[256, {bk}]>",
           "c_desc": f"tensordesc<{dtype}[128, {c_cols}]>",
           "M": "i32", "N": "i32", "K": "i32"}
    for k in ("BM", "BN", "BK", "GROUP_M", "NUM_SMS", "SUBTILE", "FP8"):
        sig[k] = "constexpr"
    return sig


# device_desc_gemm's signature (WS picks the warp-specialised form).
DESC_GEMM = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16",
             "M": "i32", "N": "i32", "K": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
             "NUM_SMS": "constexpr", "WS": "constexpr"}

# Software pipeline depths other than Triton's default (3), as the kernels'
# tutorials launch them.
STAGES = {"attention_bwd": 5}

# The kernels that load through pointers (compiled with aligned arguments).
POINTER_KERNELS = ("embedding", "moe_gemm", "ptr_gemm", "persistent_ptr_gemm", "causal_attention",
                   "vector_add", "row_softmax", "layer_norm", "grouped_gemm",
                   "grouped_tma_gemm", "layer_norm_bwd", "dropout", "pdl_add",
                   "attention_bwd", "layer_norm_dwdb", "attention_bwd_pre")


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
        "deep_tma_gemm": (deep_tma_gemm, {
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
        "device_desc_gemm": (device_desc_gemm, DESC_GEMM,
                             {"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132, "WS": False}, 4),
        "ws_desc_gemm": (device_desc_gemm, DESC_GEMM,
                         {"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132, "WS": True}, 4),
        "flag_signal": (flag_signal, {"flags": "*i32", "out": "*i32"}, {}, 4),
        "attention": (attention_fwd, {
            "q_desc": "tensordesc<fp16[128, 128]>",
            "k_desc": "tensordesc<fp16[128, 128]>",
            "v_desc": "tensordesc<fp16[128, 128]>",
            "o_desc": "tensordesc<fp16[128, 128]>",
            "N": "constexpr", "BM": "constexpr", "BN": "constexpr", "D": "constexpr",
        }, {"N": 1024, "BM": 128, "BN": 128, "D": 128}, 8),
        "ptr_gemm": (ptr_gemm, {
            "a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16",
            "M": "i32", "N": "i32", "K": "i32",
            "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32",
            "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
            "GROUP_M": "constexpr",
        }, {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, 8),
        "persistent_ptr_gemm": (persistent_ptr_gemm, {
            "a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16",
            "M": "i32", "N": "i32", "K": "i32",
            "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32",
            "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
            "GROUP_M": "constexpr", "NUM_SMS": "constexpr",
        }, {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "NUM_SMS": 132}, 8),
        "causal_attention": (causal_attention, {
            "sm_scale": "fp32", "M": "*fp32",
            "desc_q": "tensordesc<fp16[128, 128]>",
            "desc_k": "tensordesc<fp16[128, 128]>",
            "desc_v": "tensordesc<fp16[128, 128]>",
            "desc_o": "tensordesc<fp16[128, 128]>",
            "N_CTX": "i32", "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr",
            "BLOCK_N": "constexpr", "STAGE": "constexpr",
        }, {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 128, "STAGE": 3}, 8),
        "vector_add": (vector_add, {
            "x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
            "n": "i32", "BLOCK": "constexpr",
        }, {"BLOCK": 1024}, 4),
        "moe_gemm": (moe_gemm, {
            "a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16",
            "token_ids_ptr": "*i32", "expert_ids_ptr": "*i32",
            "K": "i32", "num_valid_tokens": "i32", "stride_am": "i32",
            "stride_be": "i32", "stride_bk": "i32", "stride_cm": "i32",
            "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "TOP_K": "constexpr",
        }, {"BM": 64, "BN": 128, "BK": 64, "TOP_K": 2}, 4),
        "embedding": (embedding, {
            "ids_ptr": "*i32", "table_ptr": "*fp16", "out_ptr": "*fp16",
            "D": "constexpr", "BLOCK": "constexpr",
        }, {"D": 128, "BLOCK": 64}, 4),
        "row_softmax": (row_softmax, {
            "out_ptr": "*fp32", "in_ptr": "*fp32",
            "in_stride": "i32", "out_stride": "i32",
            "rows": "i32", "cols": "i32",
            "BLOCK": "constexpr", "STAGES": "constexpr",
        }, {"BLOCK": 1024, "STAGES": 4}, 8),
        "layer_norm": (layer_norm, {
            "x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16",
            "b_ptr": "*fp16", "mean_ptr": "*fp32", "rstd_ptr": "*fp32",
            "stride": "i32", "N": "i32", "eps": "fp32",
            "BLOCK": "constexpr",
        }, {"BLOCK": 1024}, 8),
        "grouped_gemm": (grouped_gemm, {
            "a_ptrs": "*i64", "b_ptrs": "*i64", "c_ptrs": "*i64",
            "sizes": "*i32", "lds": "*i32", "groups": "i32",
            "NUM_SM": "constexpr", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
        }, {"NUM_SM": 128, "BM": 128, "BN": 128, "BK": 32}, 4),
        "grouped_tma_gemm": (grouped_tma_gemm, {
            "a_ptrs": "*i64", "b_ptrs": "*i64", "c_ptrs": "*i64",
            "sizes": "*i32", "groups": "i32",
            "NUM_SM": "constexpr", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
        }, {"NUM_SM": 128, "BM": 128, "BN": 128, "BK": 64}, 4),
        "layer_norm_bwd": (layer_norm_bwd, {
            "DX": "*fp16", "DY": "*fp16", "DW": "*fp16", "DB": "*fp16",
            "X": "*fp16", "W": "*fp16", "Mean": "*fp32", "Rstd": "*fp32",
            "Lock": "*i32", "stride": "i32", "N": "i32",
            "GROUP": "constexpr", "BLOCK": "constexpr",
        }, {"GROUP": 64, "BLOCK": 4096}, 8),
        "layer_norm_dwdb": (layer_norm_dwdb, {
            "DW": "*fp16", "DB": "*fp16", "FINAL_DW": "*fp16", "FINAL_DB": "*fp16",
            "M": "i32", "N": "i32", "BM": "constexpr", "BN": "constexpr",
        }, {"BM": 32, "BN": 128}, 4),
        "attention_bwd_pre": (attention_bwd_pre, {
            "O": "*fp16", "DO": "*fp16", "Delta": "*fp32", "N_CTX": "i32",
            "BM": "constexpr", "HD": "constexpr",
        }, {"BM": 128, "HD": 64}, 4),
        "dropout": (dropout, {
            "x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "p": "fp32",
            "seed": "i32", "BLOCK": "constexpr",
        }, {"BLOCK": 1024}, 4),
        "subtile_gemm": (subtile_gemm, subtile_signature("fp16", 64),
                         {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "NUM_SMS": 132,
                          "SUBTILE": True, "FP8": False}, 8),
        "fp8_gemm": (subtile_gemm, subtile_signature("fp8e4nv", 128),
                     {"BM": 128, "BN": 256, "BK": 128, "GROUP_M": 8, "NUM_SMS": 132,
                      "SUBTILE": False, "FP8": True}, 8),
        "attention_bwd": (attention_bwd, {
            "Q": "*fp16", "K": "*fp16", "V": "*fp16", "sm_scale": "fp32", "DO": "*fp16",
            "DQ": "*fp16", "DK": "*fp16", "DV": "*fp16", "M": "*fp32", "D": "*fp32",
            "stride_z": "i32", "stride_h": "i32", "stride_tok": "i32", "H": "i32", "N_CTX": "i32",
            "BM1": "constexpr", "BN1": "constexpr", "BM2": "constexpr", "BN2": "constexpr",
            "SLICE": "constexpr", "HD": "constexpr",
        }, {"BM1": 32, "BN1": 128, "BM2": 128, "BN2": 32, "SLICE": 2, "HD": 64}, 4),
        "pdl_add": (pdl_add, {
            "x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
            "n": "i32", "BLOCK": "constexpr",
        }, {"BLOCK": 1024}, 4),
    }
    failed = 0
    only = sys.argv[2:]
    for name, (fn, sig, cx, warps) in jobs.items():
        if only and name not in only:
            continue
        try:
            compiled = compile_one(fn, sig, cx, warps,
                                   aligned=name in POINTER_KERNELS,
                                   num_stages=STAGES.get(name))
        except Exception as e:  # report and go on: the caller says what ran
            print(f"{name}: did not compile: {type(e).__name__}: {e}".splitlines()[0])
            failed += 1
            continue
        ttgir = compiled.asm["ttgir"]
        (out / f"{name}.ttgir").write_text(ttgir)
        regs = registers(compiled)
        print(f"{name}: {len(ttgir)} bytes of TTGIR, "
              f"{regs if regs is not None else 'unknown'} registers per thread, "
              f"{compiled.metadata.shared} bytes of shared memory")
    sys.exit(1 if failed == len(jobs) else 0)


if __name__ == "__main__":
    main()
