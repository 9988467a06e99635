"""Compiles a persistent, warp-specialised, hand-pipelined FP16 GEMM written
with Gluon to TTGIR for sm_90 (Hopper) without a GPU.

The kernel has two partitions that walk the same persistent tile sequence:
  * a 1-warp producer that waits on per-stage "empty" mbarriers and issues
    TMA loads of A (BM x BK) and B (BK x BN) tiles into a STAGES-deep ring of
    shared-memory buffers, arming the per-stage "ready" mbarrier with the
    expected transaction byte count;
  * the 4-warp default (consumer) partition that waits on "ready", issues
    async warpgroup MMAs keeping at most one in flight, arrives on "empty"
    once the MMA reading a slot has retired, and runs the epilogue
    (fp32 -> fp16, registers -> shared memory -> TMA store of C).

Usage: python compile_gluon.py OUT_DIR. Writes OUT_DIR/gluon_ws_gemm.ttgir
and prints its size; on failure prints the error's first line, exits 1."""

import sys
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

# Problem tiling (constexpr) and launch shape.
BM, BN, BK, STAGES = 128, 128, 64, 4
NUM_WARPS = 4  # default (MMA) partition: one warpgroup
LOAD_WARPS = 1
LOAD_REGS = 24


@gluon.jit
def _tile_coords(tile, num_pid_n, BM: gl.constexpr, BN: gl.constexpr):
    # Row-major walk over the M x N grid of output tiles.
    off_m = (tile // num_pid_n) * BM
    off_n = (tile % num_pid_n) * BN
    return off_m, off_n


@gluon.jit
def _producer(a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K,
              BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
              STAGES: gl.constexpr):
    num_pid_n = gl.cdiv(N, BN)
    num_tiles = gl.cdiv(M, BM) * num_pid_n
    k_steps = gl.cdiv(K, BK)
    tx_bytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes

    it = 0  # global k-step counter, shared convention with the consumer
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        off_m, off_n = _tile_coords(tile, num_pid_n, BM, BN)
        for kk in range(k_steps):
            slot = it % STAGES
            # Slots start free: waiting on parity 1 of a fresh barrier passes.
            free_phase = ((it // STAGES) & 1) ^ 1
            mbarrier.wait(empty.index(slot), free_phase)
            bar = ready.index(slot)
            mbarrier.expect(bar, tx_bytes)
            tma.async_load(a_desc, [off_m, kk * BK], bar, a_ring.index(slot))
            tma.async_load(b_desc, [kk * BK, off_n], bar, b_ring.index(slot))
            it += 1


@gluon.jit
def _consumer(c_desc, a_ring, b_ring, ready, empty, c_smem, M, N, K,
              BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
              STAGES: gl.constexpr, NUM_WARPS: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BN, 16])
    num_pid_n = gl.cdiv(N, BN)
    num_tiles = gl.cdiv(M, BM) * num_pid_n
    k_steps = gl.cdiv(K, BK)

    it = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        off_m, off_n = _tile_coords(tile, num_pid_n, BM, BN)
        acc = gl.zeros((BM, BN), gl.float32, acc_layout)
        for kk in range(k_steps):
            slot = it % STAGES
            mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
            a_tile = a_ring.index(slot)
            b_tile = b_ring.index(slot)
            tok = warpgroup_mma(a_tile, b_tile, acc, is_async=True)
            # Keep one MMA in flight: the previous one has now retired, so
            # the slot it read can go back to the producer.
            acc = warpgroup_mma_wait(num_outstanding=1, deps=[tok, a_tile, b_tile])[0]
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=kk > 0)
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        # Release the slot read by this tile's last MMA.
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=k_steps > 0)

        # Epilogue: the previous tile's TMA store must have drained c_smem.
        out = acc.to(c_desc.dtype)
        tma.store_wait(pendings=0)
        c_smem.store(out)
        fence_async_shared()
        tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(pendings=0)


@gluon.jit
def ws_gemm_kernel(a_desc, b_desc, c_desc, M, N, K,
                   BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                   STAGES: gl.constexpr, LOAD_WARPS: gl.constexpr,
                   LOAD_REGS: gl.constexpr):
    dtype: gl.constexpr = a_desc.dtype
    a_ring = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], a_desc.layout)
    b_ring = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()

    gl.warp_specialize(
        [
            (_consumer, (c_desc, a_ring, b_ring, ready, empty, c_smem, M, N, K,
                         BM, BN, BK, STAGES, gl.num_warps())),
            (_producer, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K,
                         BM, BN, BK, STAGES)),
        ],
        [LOAD_WARPS],
        [LOAD_REGS],
    )

    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


def _desc_sig(shape, dtype=gl.float16):
    layout = gl.NVMMASharedLayout.get_default_for(shape, dtype)
    return f"tensordesc<fp16[{shape[0]}, {shape[1]}],{layout!r}>"


def compile_gemm():
    signature = {
        "a_desc": _desc_sig([BM, BK]),
        "b_desc": _desc_sig([BK, BN]),
        "c_desc": _desc_sig([BM, BN]),
        "M": "i32", "N": "i32", "K": "i32",
        "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
        "STAGES": "constexpr", "LOAD_WARPS": "constexpr", "LOAD_REGS": "constexpr",
    }
    constexprs = {"BM": BM, "BN": BN, "BK": BK, "STAGES": STAGES,
                  "LOAD_WARPS": LOAD_WARPS, "LOAD_REGS": LOAD_REGS}
    src = gluon.GluonASTSource(fn=ws_gemm_kernel, signature=signature,
                               constexprs=constexprs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": NUM_WARPS})
    return compiled.asm["ttgir"]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    try:
        ttgir = compile_gemm()
    except Exception as e:  # report the first line only; the caller decides
        print(f"gluon_ws_gemm: did not compile: {type(e).__name__}: {e}".splitlines()[0])
        sys.exit(1)
    (out / "gluon_ws_gemm.ttgir").write_text(ttgir)
    print(f"gluon_ws_gemm: {len(ttgir)} bytes of TTGIR")


if __name__ == "__main__":
    main()
