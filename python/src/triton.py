"""simfa.triton: simulate a Triton or Gluon kernel without a GPU.

    import simfa.triton as st
    a = st.Tensor((8192, 8192), "fp16")
    r = st.simulate(matmul_kernel, (64, 64, 1),
                    st.Descriptor(a, (128, 64)), ..., 8192, BM=128, gpu="h100")

`compile` compiles the kernel for sm_90 on the CPU (Triton's own compiler,
no GPU, no torch) with stand-in arguments, and returns its TTGIR and the
launch (a dict in the form of `simfa ttgir run`'s launch file);
`simulate` compiles and simulates it and returns the report dict that
`simfa ttgir run --json` prints. Stand-ins: `Tensor(shape, dtype)` for a
pointer argument (`Tensor(shape, dtype, values=[...])` when the kernel
reads its contents: sizes, counters, or other Tensors' addresses), `Descriptor(tensor, block_shape)` for a host TMA
descriptor, a Python int, float or bool for a scalar argument (as
Triton's launcher types them: a float is `fp32`, a bool `u1`); keyword
arguments are the kernel's constexprs. Tensors get global addresses one after the other,
each 1 MiB-aligned, row-major with packed strides.

As Triton's launcher does for such arguments, pointers and integers that
are multiples of 16 are marked divisible by 16, and an integer equal to 1
(a unit stride) becomes a constant of the kernel: the compiler vectorises
and pipelines loads through pointers only when it knows both. The launch's
`regs` are the registers per thread ptxas gave the kernel (read from the
cubin with the wheel's `cuobjdump`, when it is there), and its `smem` the
shared memory Triton's allocator laid out.
"""

ELEM_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8e4nv": 1, "fp8e5": 1, "int8": 1, "int32": 4,
              "int64": 8}

# Triton's signature names of the integer dtypes.
SIGNATURE = {"int8": "i8", "int32": "i32", "int64": "i64"}


class Tensor:
    """A tensor in global memory: its shape (outermost first) and dtype.

    `values` are its contents, in memory order, where the kernel's control
    flow or addresses depend on them (a grouped GEMM's sizes, a lock's
    counters): ints, or Tensors standing for their addresses (a table of
    matrices, as `torch.tensor([a.data_ptr(), ...])` makes one). A Tensor
    reached only through such a table becomes a `[buffers]` entry."""

    def __init__(self, shape, dtype="fp16", values=None):
        if dtype not in ELEM_BYTES:
            raise ValueError(f"dtype {dtype!r} is not one of {sorted(ELEM_BYTES)}")
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.base = None
        self.values = None
        if values is not None:
            self.values = list(values)
            for v in self.values:
                if isinstance(v, bool) or not isinstance(v, (int, Tensor)):
                    raise TypeError(f"values: expected ints or Tensors, got {v!r}")


class Descriptor:
    """A host TMA descriptor over `tensor` with a block of `block_shape`
    (outermost first), as `TensorDescriptor.from_tensor` makes one."""

    def __init__(self, tensor, block_shape):
        self.tensor = tensor
        self.block_shape = tuple(int(b) for b in block_shape)


def _place(tensors):
    """Gives every tensor a base address, 1 MiB-aligned, one after another."""
    at = 1 << 28
    for t in tensors:
        if t.base is None:
            t.base = at
            size = ELEM_BYTES[t.dtype]
            for s in t.shape:
                size *= s
            at += (size + (1 << 20) - 1) // (1 << 20) * (1 << 20)


def _tensor_entry(t):
    elem = ELEM_BYTES[t.dtype]
    dims = list(reversed(t.shape))
    strides, acc = [], elem
    for d in dims[:-1]:
        acc *= d
        strides.append(acc)
    entry = {"base": t.base, "elem": elem, "dims": dims, "strides": strides}
    if t.values is not None:
        entry["values"] = [v.base if isinstance(v, Tensor) else v for v in t.values]
    return entry


def _reached(tensors):
    """The Tensors `tensors`' values stand for, that are not among them."""
    out = []
    for t in tensors:
        for v in t.values or []:
            if isinstance(v, Tensor) and all(v is not u for u in tensors + out):
                out.append(v)
    return out


def _registers(compiled):
    """Registers per thread in the compiled kernel's cubin, or None."""
    import os
    import subprocess
    import tempfile

    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    cubin = compiled.asm.get("cubin")
    if not cubin or not os.path.exists(tool):
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
    for word in out.split():
        if word.startswith("REG:"):
            return int(word[4:])
    return None


def compile(fn, grid, *args, num_warps=4, num_stages=3, **constexprs):
    """The TTGIR of `fn` for sm_90 and its launch dict for `grid` and the
    stand-in `args`; `fn` is a `@triton.jit` or `@gluon.jit` function."""
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget

    names = [p for p in inspect.signature(fn.fn).parameters]
    positional = [n for n in names if n not in constexprs]
    if len(args) != len(positional):
        raise TypeError(f"{fn.fn.__name__} takes {len(positional)} non-constexpr arguments "
                        f"({', '.join(positional)}), {len(args)} given")
    tensors = [a.tensor if isinstance(a, Descriptor) else a
               for a in args if isinstance(a, (Tensor, Descriptor))]
    buffers = _reached(tensors)
    _place(tensors + buffers)
    gluon = type(fn).__module__.startswith("triton.experimental.gluon")
    signature, launch = {}, {"grid": [int(g) for g in (tuple(grid) + (1, 1))[:3]],
                             "args": {}, "tensors": {}}
    aligned, ones = [], {}
    for name, a in zip(positional, args):
        if isinstance(a, Descriptor):
            dt, block = a.tensor.dtype, list(a.block_shape)
            sig = f"tensordesc<{dt}[{', '.join(map(str, block))}]>"
            if gluon:
                from triton.experimental.gluon import language as gl
                layout = gl.NVMMASharedLayout.get_default_for(block, getattr(gl, {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}[dt]))
                sig = f"tensordesc<{dt}[{', '.join(map(str, block))}],{layout!r}>"
            signature[name] = sig
            launch["tensors"][name] = _tensor_entry(a.tensor)
        elif isinstance(a, Tensor):
            signature[name] = f"*{SIGNATURE.get(a.dtype, a.dtype)}"
            launch["tensors"][name] = _tensor_entry(a)
            aligned.append(name)
        elif isinstance(a, bool):
            signature[name] = "u1"
            launch["args"][name] = int(a)
        elif isinstance(a, float):
            # A float steers no control flow simfa follows: its type only.
            signature[name] = "fp32"
        elif not isinstance(a, int):
            raise TypeError(f"argument {name}: expected a Tensor, a Descriptor, an int, a float or "
                            f"a bool, got {a!r}")
        elif a == 1:
            # As Triton's launcher specialises an integer equal to 1 (a unit
            # stride): a constant of the kernel, not an argument.
            signature[name] = "constexpr"
            ones[name] = 1
        else:
            signature[name] = "i32" if -(1 << 31) <= a < (1 << 31) else "i64"
            launch["args"][name] = a
            if a % 16 == 0:
                aligned.append(name)
    if buffers:
        launch["buffers"] = {f"buffer{i}": _tensor_entry(t) for i, t in enumerate(buffers)}
    for k in constexprs:
        signature[k] = "constexpr"
    constexprs = {**constexprs, **ones}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    if gluon:
        from triton.experimental import gluon as gluon_mod
        src = gluon_mod.GluonASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    else:
        from triton.compiler import ASTSource
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    options = {"num_warps": num_warps}
    if not gluon:
        options["num_stages"] = num_stages
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    launch["kernel"] = fn.fn.__name__
    regs = _registers(compiled)
    if regs is not None:
        launch["regs"] = regs
    launch["smem"] = int(compiled.metadata.shared)
    return compiled.asm["ttgir"], launch


def simulate(fn, grid, *args, gpu="h100", config=None, num_warps=4, num_stages=3, **constexprs):
    """Compiles `fn` (see `compile`) and simulates it: the report dict."""
    from simfa import ttgir_run

    ttgir, launch = compile(fn, grid, *args, num_warps=num_warps, num_stages=num_stages, **constexprs)
    return ttgir_run(ttgir, launch, gpu=gpu, config=config)
