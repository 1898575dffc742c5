"""Register-blocked ``a @ b`` on the CPU: the product an LSTM or GRU layer runs once per time step, and the large
2-D products where it beats OpenBLAS (``cpu._product``: 0.86-0.96 of its time on a GPT's and an LSTM's).

The recurrent product is ``h @ W_hh.T`` forward and ``d(gates) @ W_hh`` backward: 70 products a step in a 2-layer
model over 35 steps, each with the same ``b``, packed once per layer (``pack``). numpy's OpenBLAS runs its SkylakeX
(AVX-512) sgemm on AMD Zen 4, slow for so few rows: at batch 20, hidden 256, float32, one thread,
``(20, 256) x (256, 1024)`` takes it 201 us alone (149 in an LSTM layer's loop on a 64-byte aligned copy), torch's
MKL 137 us. This kernel: 94 us alone and 95-99 in the layer's loop; ``(20, 1024) x (1024, 256)``: 92 us (OpenBLAS
128).

How: the output goes in blocks of ``ROWS`` rows by ``VECTORS`` SIMD vectors of columns. A block keeps its
``ROWS * VECTORS`` vector sums in registers; at each step along the shared dimension it loads ``VECTORS`` vectors
of ``b``'s row and, for each of its rows, broadcasts one element of ``a`` and adds the products with fused
multiply-adds. That loop is written in LLVM IR (``block_intrinsic``) because LLVM does not find it from
scalar Python: it vectorizes the loop along the shared dimension instead, as dot products that each end in a
horizontal sum (the previous kernel here: 122 and 113 us), or, with its SLP vectorizer, spills (490 us).
Each output is summed in order along the shared dimension, in the operands' precision (float32 in float32, as
BLAS sums), with no fast-math liberty: infinities and NaNs propagate as in BLAS. Rows past the last whole block
run through a zero-padded copy, and the last panel of columns is zero-padded, so one block shape serves every
shape.

Imported lazily by ``backend/cpu.py`` (it starts Numba).
"""

from __future__ import annotations

import numpy as np

from . import codegen, cpu_threads

#: Output rows per register block, and SIMD vectors of columns per row. At batch 20, hidden 256, float32, one
#: thread (``(20, 256) x (256, 1024)`` and ``(20, 1024) x (1024, 256)``): 5 x 4 93 and 90 us, 4 x 4 112 and 91,
#: 10 x 2 102 and 124, 5 x 2 144 and 114. Twenty sums and four loads of ``b`` fit AVX-512's 32 registers.
ROWS, VECTORS = 5, 4


def vector_bytes() -> int:
    """The host's SIMD register width: 64 bytes with AVX-512, 32 with AVX (LLVM splits a wider vector type into
    the host's registers, so any width is correct; this one fills them)."""
    return 64 if codegen.host_cpu()[1].get("avx512f") else 32


def measured_host() -> bool:
    """Is this host one the kernels were measured faster than BLAS on: with AVX-512 (32 vector registers)? With
    16, the 20 sums of a block and four loads of ``b`` would spill; the kernels stay correct there, but BLAS
    runs the products."""
    return vector_bytes() == 64


def shares_measured_faster() -> bool:
    """Did a product shared among two threads (``product``) beat OpenBLAS's two threads on this kind of host: an
    AMD Zen core (an LSTM's six 2-D products in its step: 21.9 ms against 27.1)? On an Intel Xeon (AVX-512),
    OpenBLAS's two threads ran 13 of 15 of a GPT's and an LSTM's 2-D products faster (the shares took 0.87-1.36x
    its time; the LSTM's (1000, 700) x (700, 256) weight gradient 1984 us against 1459), though one thread of
    the blocked kernel beats one of OpenBLAS's there on most of them."""
    return codegen.host_cpu()[0].startswith("znver")


def ir_types(kind: str, vector_bytes: int) -> tuple:
    """The LLVM types an intrinsic works in for ``kind`` (``"f32"``/``"f64"``): the element, its size in bytes,
    the lanes of a ``vector_bytes`` vector, that vector, and a pointer to an element."""
    from llvmlite import ir

    element = ir.FloatType() if kind == "f32" else ir.DoubleType()
    size = 4 if kind == "f32" else 8
    lanes = vector_bytes // size
    return element, size, lanes, ir.VectorType(element, lanes), element.as_pointer()


def block_intrinsic(kind: str, rows: int, vectors: int, vector_bytes: int, row_table: bool = False,
                    accumulate: bool = False, bias: bool = False):  # fmt: skip
    """A Numba intrinsic ``block(a, a_row, a_step, b, ldb, out, ldo, depth)`` (addresses as integers, strides in
    elements: ``a``'s between rows and along the shared dimension, ``b``'s and ``out``'s between rows) computing
    one ``rows`` x ``vectors`` register block: ``out[:rows, :W] = a[:rows, :depth] @ b[:depth, :W]``, ``W`` being
    ``vectors`` vectors of ``vector_bytes``, in ``kind``'s element type (``"f32"`` or ``"f64"``). ``depth`` must be
    at least 1: the loop runs once before its test. With ``row_table``, ``ldb`` is instead the address of an
    ``int64`` table of ``b``'s rows' offsets (in elements): row ``k`` starts at ``b + table[k]``, so that ``b``
    may be rows anywhere in memory (a convolution's taps read from its padded input in place). With
    ``accumulate``, the block adds to ``out`` (``out[:rows, :W] += ...``, the sums starting from its values): a
    product summed over chunks of its shared dimension (a Winograd weight gradient's tiles) needs no buffer. With
    ``bias``, a ninth argument is the address of ``W`` values added to each row's sums as they are stored
    (``out = a @ b + bias``, the sum rounded before the bias is added, as a product and then an add round it): a
    linear layer's forward writes its output once."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    _, size, lanes, vector, pointer = ir_types(kind, vector_bytes)
    i64, i32 = ir.IntType(64), ir.IntType(32)

    def codegen_block(context, builder, signature, args):
        a_address, a_row, a_step, b_address, ldb, out_address, ldo, depth = args[:8]
        a_start, b_start = builder.inttoptr(a_address, pointer), builder.inttoptr(b_address, pointer)
        out_start = builder.inttoptr(out_address, pointer)
        name = f"llvm.fma.v{lanes}{'f32' if kind == 'f32' else 'f64'}"
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector] * 3), name)
        if accumulate:
            start_sums = []
            for r in range(rows):
                out_row = builder.gep(out_start, [builder.mul(ir.Constant(i64, r), ldo)])
                start_sums.append([
                    builder.load(builder.bitcast(builder.gep(out_row, [ir.Constant(i64, v * lanes)]),
                                                 vector.as_pointer()), align=size)
                    for v in range(vectors)
                ])  # fmt: skip
        else:
            # The block's output lines fetched for writing while the products run: a product's output is written
            # once, seldom from the cache, and each store that misses waits on its line's read (a GPT's
            # ``(768, 128) x (128, 512)`` ran at 96-97 GF/s in its step without this, 102-105 with it).
            byte_pointer = ir.IntType(8).as_pointer()
            prefetch = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0"
            )
            write, keep, data = ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)
            for r in range(rows):
                out_row = builder.gep(out_start, [builder.mul(ir.Constant(i64, r), ldo)])
                for v in range(vectors):
                    line = builder.bitcast(builder.gep(out_row, [ir.Constant(i64, v * lanes)]), byte_pointer)
                    builder.call(prefetch, [line, write, keep, data])
        entry = builder.block
        loop = builder.append_basic_block("block_loop")
        done = builder.append_basic_block("block_done")
        builder.branch(loop)
        builder.position_at_end(loop)
        k = builder.phi(i64)
        k.add_incoming(ir.Constant(i64, 0), entry)
        zero = ir.Constant(vector, [0.0] * lanes)
        sums = [[builder.phi(vector) for _ in range(vectors)] for _ in range(rows)]
        for r, row in enumerate(sums):
            for v, phi in enumerate(row):
                phi.add_incoming(start_sums[r][v] if accumulate else zero, entry)
        if row_table:
            table = builder.inttoptr(ldb, i64.as_pointer())
            b_row = builder.gep(b_start, [builder.load(builder.gep(table, [k]))])
        else:
            b_row = builder.gep(b_start, [builder.mul(k, ldb)])
        a_column = builder.gep(a_start, [builder.mul(k, a_step)])
        b_parts = []
        for v in range(vectors):
            address = builder.bitcast(builder.gep(b_row, [ir.Constant(i64, v * lanes)]), vector.as_pointer())
            b_parts.append(builder.load(address, align=size))
        undefined = ir.Constant(vector, ir.Undefined)
        splat = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
        updated = []
        for r in range(rows):
            scalar = builder.load(builder.gep(a_column, [builder.mul(ir.Constant(i64, r), a_row)]))
            broadcast = builder.shuffle_vector(builder.insert_element(undefined, scalar, ir.Constant(i32, 0)),
                                               undefined, splat)  # fmt: skip
            updated.append([builder.call(fma, [broadcast, b_parts[v], sums[r][v]]) for v in range(vectors)])
        k_next = builder.add(k, ir.Constant(i64, 1))
        k.add_incoming(k_next, builder.block)
        for r in range(rows):
            for v in range(vectors):
                sums[r][v].add_incoming(updated[r][v], builder.block)
        builder.cbranch(builder.icmp_signed("<", k_next, depth), loop, done)
        builder.position_at_end(done)
        if bias:
            bias_start = builder.inttoptr(args[8], pointer)
            bias_parts = [
                builder.load(builder.bitcast(builder.gep(bias_start, [ir.Constant(i64, v * lanes)]),
                                             vector.as_pointer()), align=size)
                for v in range(vectors)
            ]  # fmt: skip
            updated = [[builder.fadd(row[v], bias_parts[v]) for v in range(vectors)] for row in updated]
        for r in range(rows):
            out_row = builder.gep(out_start, [builder.mul(ir.Constant(i64, r), ldo)])
            for v in range(vectors):
                address = builder.bitcast(builder.gep(out_row, [ir.Constant(i64, v * lanes)]), vector.as_pointer())
                builder.store(updated[r][v], address, align=size)
        return context.get_dummy_value()

    if bias:

        def typer(typingctx, a, a_row, a_step, b, ldb, out, ldo, depth, bias_address):
            return types.void(*([types.intp] * 9)), codegen_block

    else:

        def typer(typingctx, a, a_row, a_step, b, ldb, out, ldo, depth):
            return types.void(*([types.intp] * 8)), codegen_block

    return intrinsic(typer)


def transpose_intrinsic(kind: str, vector_bytes: int):
    """A Numba intrinsic ``transpose(source, source_row, target, target_row)`` (addresses as integers, row strides
    in elements) writing the transpose of the square tile of one vector's ``lanes`` rows of ``lanes`` elements at
    ``source`` to ``target``. Rows are loaded whole, their off-diagonal halves, quarters, ... exchanged with
    shuffles (each stage swaps one bit of the row and column index), and stored whole: ``pack``'s copy of a
    transposed operand (``W.T``) at one pass over it, where scalar loops read across rows."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    _, size, lanes, vector, pointer = ir_types(kind, vector_bytes)
    i64, i32 = ir.IntType(64), ir.IntType(32)

    def codegen_transpose(context, builder, signature, args):
        source_address, source_row, target_address, target_row = args
        source, target = builder.inttoptr(source_address, pointer), builder.inttoptr(target_address, pointer)

        def row_address(start, stride, r):
            return builder.bitcast(builder.gep(start, [builder.mul(ir.Constant(i64, r), stride)]), vector.as_pointer())

        rows = [builder.load(row_address(source, source_row, r), align=size) for r in range(lanes)]
        bit = 1
        while bit < lanes:
            upper = ir.Constant(
                ir.VectorType(i32, lanes), [j if not j & bit else lanes + j - bit for j in range(lanes)]
            )
            lower = ir.Constant(
                ir.VectorType(i32, lanes), [j + bit if not j & bit else lanes + j for j in range(lanes)]
            )
            swapped = list(rows)
            for r in range(lanes):
                if not r & bit:
                    swapped[r] = builder.shuffle_vector(rows[r], rows[r + bit], upper)
                    swapped[r + bit] = builder.shuffle_vector(rows[r], rows[r + bit], lower)
            rows, bit = swapped, bit * 2
        for r in range(lanes):
            builder.store(rows[r], row_address(target, target_row, r), align=size)
        return context.get_dummy_value()

    def typer(typingctx, source, source_row, target, target_row):
        return types.void(*([types.intp] * 4)), codegen_transpose

    return intrinsic(typer)


def copy_intrinsic(kind: str, vector_bytes: int):
    """A Numba intrinsic ``copy(source, target)`` (addresses as integers) copying one SIMD vector's ``lanes``
    values. ``copy_row`` (``ROW_COPIES``) copies a row with it: LLVM's own vectorized loop runs a whole unrolled
    block of vectors or none, and a 24-value row took its scalar remainder (1.5 ns a value)."""
    from numba.core import types
    from numba.extending import intrinsic

    _, size, _, vector, _ = ir_types(kind, vector_bytes)

    def codegen_copy(context, builder, signature, args):
        source, target = (builder.inttoptr(address, vector.as_pointer()) for address in args)
        builder.store(builder.load(source, align=size), target, align=size)
        return context.get_dummy_value()

    def typer(typingctx, source, target):
        return types.void(types.intp, types.intp), codegen_copy

    return intrinsic(typer)


#: Row copies for compiled modules written once for both float kinds (``codegen.kind_source``, with
#: ``kind_words`` and ``VECTOR_BYTES`` among their constants): ``copy_row_KIND(source, target)`` copies a
#: contiguous row in whole vectors, and ``transpose_KIND(source, target)`` writes ``source.T`` through
#: ``transpose_intrinsic``'s square tiles (a transposed operand's panels in ``pack``, a convolution's input
#: channels-last, its gradient's planes).
ROW_COPIES = """
COPY_KIND = row_products.copy_intrinsic("KIND", VECTOR_BYTES)
TRANSPOSE_KIND = row_products.transpose_intrinsic("KIND", VECTOR_BYTES)


@njit(inline='always')
def copy_row_KIND(source, target):
    # target[:] = source, both contiguous: whole vectors, the last one overlapping the one before
    count = len(source)
    if count < LANES:
        for i in range(count):
            target[i] = source[i]
        return
    for i in range(0, count - LANES, LANES):
        COPY_KIND(source.ctypes.data + BYTES * i, target.ctypes.data + BYTES * i)
    COPY_KIND(source.ctypes.data + BYTES * (count - LANES), target.ctypes.data + BYTES * (count - LANES))


@njit(inline='always')
def transpose_KIND(source, target):
    # target (m, n) = source (n, m).T, each row of either contiguous: lanes x lanes tiles, the last ones of a
    # row or column overlapping those before
    rows, columns = source.shape
    if rows < LANES or columns < LANES:
        for i in range(rows):
            for j in range(columns):
                target[j, i] = source[i, j]
        return
    source_row, target_row = source.strides[0] // BYTES, target.strides[0] // BYTES
    for i0 in range(0, rows, LANES):
        i = min(i0, rows - LANES)
        for j0 in range(0, columns, LANES):
            j = min(j0, columns - LANES)
            TRANSPOSE_KIND(source.ctypes.data + BYTES * (i * source_row + j), source_row,
                           target.ctypes.data + BYTES * (j * target_row + i), target_row)
"""


def _source(kind: str, vector_bytes: int) -> str:
    """``product_<kind>(a, panels, out)``: ``out[:] = a @ b``, ``b`` packed by ``pack``, ``a`` strided in any way
    and ``out`` with unit column stride. The depth runs in chunks of ``CHUNK_DEPTH`` steps, each block adding to
    the sums the chunks before it stored (the same sums in the same order: the same bits as one pass), and
    ``a``'s rows in chunks of ``CHUNK_ROWS``; within a chunk, panels outside, row blocks inside. A panel's chunk
    (32 KiB) then stays in the L1 cache while the row blocks run over it, and the chunk of ``a`` in L2. Over a
    panel's whole depth (96 KiB and more from depth 384) each block read the panel from L2 (one thread, float32,
    Xeon with AVX-512: 95-140 GF/s where the chunked products run at 126-158; a block alone runs at 166 with its
    panel in L1 and 137 from L2). A ragged last block of rows runs on a zero-padded copy of its rows, and blocks
    past ``out``'s last whole rows or columns are stored in edge buffers, copied out at the end.
    ``product_with_bias_<kind>(a, panels, bias, out)``: ``out[:] = a @ b + bias``, ``bias`` zero-padded to the
    panels' columns, added as each block is stored.
    ``product_at_<kind>(a_address, rows, depth, a_row, a_step, panels, out, bias)``: either, with ``a`` given by
    its address and strides (in elements), as a thread's share receives it, and ``bias`` empty for none.
    ``share_<kind>(args)``: ``product_at_<kind>`` on one thread's share of the panels, a C function taking a pointer
    to ``SHARE_FIELDS`` integers: ``a``'s address, rows, depth and strides, the panels' address, ``out``'s address
    (C-contiguous) and columns, the first panel of the share and how many, the padded bias's address and length
    (0 for none), and ``b``'s address and strides in bytes where the share packs its own panels first (address 0
    where they are packed).
    ``pack_share_<kind>(args)``: ``pack_<kind>`` of one thread's share of the panels, from the same integers (the
    depth, the panels' address, the columns, the share's panels and ``b``'s).
    ``pack_<kind>(b, panels)``: ``pack``'s copy, the last panel's columns past ``b``'s zeroed."""
    size = 4 if kind == "f32" else 8
    dtype = "float32" if kind == "f32" else "float64"
    lanes = vector_bytes // size
    width = VECTORS * lanes
    return f"""
BLOCK_{kind} = row_products.block_intrinsic("{kind}", {ROWS}, {VECTORS}, {vector_bytes})
BLOCK_BIAS_{kind} = row_products.block_intrinsic("{kind}", {ROWS}, {VECTORS}, {vector_bytes}, bias=True)
BLOCK_ADD_{kind} = row_products.block_intrinsic("{kind}", {ROWS}, {VECTORS}, {vector_bytes}, accumulate=True)
BLOCK_ADD_BIAS_{kind} = row_products.block_intrinsic("{kind}", {ROWS}, {VECTORS}, {vector_bytes}, accumulate=True,
                                                     bias=True)
AT_{kind} = codegen.address_intrinsic()


@njit(cache=CACHE, nogil=True, boundscheck=False)
def product_{kind}(a, panels, out):
    product_with_bias_{kind}(a, panels, np.empty(0, np.{dtype}), out)


@njit(cache=CACHE, nogil=True, boundscheck=False)
def product_with_bias_{kind}(a, panels, bias, out):
    a_row, a_step = a.strides[0] // {size}, a.strides[1] // {size}
    product_at_{kind}(a.ctypes.data, a.shape[0], a.shape[1], a_row, a_step, panels, out, bias)


@njit(inline='always')
def block_{kind}(a_block, a_rows, a_steps, b_block, out_block, ldo, depth, bias, j0, add, finish):
    # one block of a chunk of the depth, adding to ``out`` after the first chunk, the bias after the last
    if finish and bias.size:
        bias_block = bias.ctypes.data + {size} * j0
        if add:
            BLOCK_ADD_BIAS_{kind}(a_block, a_rows, a_steps, b_block, {width}, out_block, ldo, depth, bias_block)
        else:
            BLOCK_BIAS_{kind}(a_block, a_rows, a_steps, b_block, {width}, out_block, ldo, depth, bias_block)
    elif add:
        BLOCK_ADD_{kind}(a_block, a_rows, a_steps, b_block, {width}, out_block, ldo, depth)
    else:
        BLOCK_{kind}(a_block, a_rows, a_steps, b_block, {width}, out_block, ldo, depth)


@njit(cache=CACHE, nogil=True, boundscheck=False)
def product_at_{kind}(a_address, m, depth, a_row, a_step, panels, out, bias):
    n = out.shape[1]
    if depth == 0:
        out[:] = 0
        if bias.size:
            out[:] += bias[:n]
        return
    a = as_strided(carray(AT_{kind}(a_address), (1,), np.{dtype}), (m, depth), ({size} * a_row, {size} * a_step))
    ldo = out.strides[0] // {size}
    count = panels.shape[0]
    whole = m - m % {ROWS}
    last_columns = n - (count - 1) * {width}
    # blocks past out's last whole rows or columns are written to edge buffers, copied out at the end
    edge_rows = np.empty(({ROWS} if whole < m else 0, count * {width}), np.{dtype})
    edge_columns = np.empty((whole if last_columns < {width} else 0, {width}), np.{dtype})
    padded_a = np.zeros(({ROWS} if whole < m else 0, depth), np.{dtype})
    padded_a[: m - whole] = a[whole:]
    for k0 in range(0, depth, CHUNK_DEPTH):
        steps = min(CHUNK_DEPTH, depth - k0)
        add, finish = k0 > 0, k0 + steps == depth
        for i0 in range(0, m, CHUNK_ROWS):
            for panel in range(count):
                j0 = panel * {width}
                b_block = panels.ctypes.data + {size} * (panel * depth + k0) * {width}
                for row in range(i0, min(m, i0 + CHUNK_ROWS), {ROWS}):
                    if row >= whole:
                        a_block, a_rows, a_steps = padded_a.ctypes.data + {size} * k0, depth, 1
                        target, ld = edge_rows.ctypes.data + {size} * j0, edge_rows.shape[1]
                    else:
                        a_block, a_rows, a_steps = a_address + {size} * (row * a_row + k0 * a_step), a_row, a_step
                        if panel == count - 1 and last_columns < {width}:
                            target, ld = edge_columns.ctypes.data + {size} * row * {width}, {width}
                        else:
                            target, ld = out.ctypes.data + {size} * (row * ldo + j0), ldo
                    block_{kind}(a_block, a_rows, a_steps, b_block, target, ld, steps, bias, j0, add, finish)
    if whole < m:
        out[whole:, :] = edge_rows[: m - whole, :n]
    if last_columns < {width}:
        out[:whole, n - last_columns :] = edge_columns[:, :last_columns]


@njit(cache=CACHE, nogil=True, boundscheck=False)
def pack_{kind}(b, panels):
    depth, n = b.shape
    for panel in range(panels.shape[0]):
        j0 = panel * {width}
        columns = min({width}, n - j0)
        if b.strides[1] == {size}:
            for k in range(depth):
                copy_row_{kind}(b[k, j0 : j0 + columns], panels[panel, k, :columns])
        elif b.strides[0] == {size} and b.strides[1] % {size} == 0:
            transpose_{kind}(b[:, j0 : j0 + columns].T, panels[panel, :, :columns])
        else:
            for k in range(depth):
                for c in range(columns):
                    panels[panel, k, c] = b[k, j0 + c]
        for k in range(depth):
            for c in range(columns, {width}):
                panels[panel, k, c] = 0


@njit(inline='always')
def share_panels_{kind}(fields):
    # a share's panels, and the columns of `b` (and of `out`) they hold
    depth, columns, first, count = fields[2], fields[7], fields[8], fields[9]
    panels = carray(AT_{kind}(fields[5] + {size} * first * depth * {width}), (count, depth, {width}), np.{dtype})
    return panels, first * {width}, min(columns, (first + count) * {width})


@njit(inline='always')
def pack_share_panels_{kind}(fields, panels, j0, j1):
    b = as_strided(carray(AT_{kind}(fields[12]), (1,), np.{dtype}), (fields[2], fields[7]), (fields[13], fields[14]))
    pack_{kind}(b[:, j0:j1], panels)


@cfunc(types.void(types.voidptr), cache=CACHE, nopython=True, boundscheck=False)
def share_{kind}(args):
    fields = carray(args, (SHARE_FIELDS,), np.int64)
    panels, j0, j1 = share_panels_{kind}(fields)
    if fields[12]:
        pack_share_panels_{kind}(fields, panels, j0, j1)
    skip = j0 if fields[11] else 0
    bias = carray(AT_{kind}(fields[10] + {size} * skip), (fields[11] - skip,), np.{dtype})
    out = carray(AT_{kind}(fields[6]), (fields[1], fields[7]), np.{dtype})
    product_at_{kind}(fields[0], fields[1], fields[2], fields[3], fields[4], panels, out[:, j0:j1], bias)


@cfunc(types.void(types.voidptr), cache=CACHE, nopython=True, boundscheck=False)
def pack_share_{kind}(args):
    fields = carray(args, (SHARE_FIELDS,), np.int64)
    panels, j0, j1 = share_panels_{kind}(fields)
    pack_share_panels_{kind}(fields, panels, j0, j1)
"""


#: The fewest multiply-adds a product shares among threads: (20, 256) x (256, 1024) has 5.2 million.
SHARED_WORK = 1 << 20

#: The steps and rows of ``product``'s chunks of ``a`` (see ``_source``): a panel's ``CHUNK_DEPTH`` steps (32 KiB)
#: stay in the L1 cache while the chunk's row blocks run over them. Of 96 to 256 steps and 60 to 480 rows, 128 and
#: 240 ran a GPT's and an LSTM's products fastest (Xeon, one thread; 256 steps took 1.12x as long, 192 1.08x).
CHUNK_DEPTH, CHUNK_ROWS = 128, 240

#: The integers ``share_<kind>`` reads (see ``_source``).
SHARE_FIELDS = 15

#: The fewest bytes of panels ``pack`` shares among threads (a 256 KiB pack takes 30-50 us on one thread).
SHARED_PACK_BYTES = 1 << 18

_module = None
_FLOAT32 = np.dtype(np.float32)


def intrinsics_digest() -> str:
    """The digest of the intrinsics' code, for the text of a module that uses them: their code is not in the
    module's text, so without it a change to them would not make a new cache entry."""
    import hashlib
    import inspect

    intrinsics = (ir_types, block_intrinsic, transpose_intrinsic, copy_intrinsic, codegen.address_intrinsic)
    code = "".join(inspect.getsource(f) for f in intrinsics)
    return hashlib.sha1(code.encode()).hexdigest()[:16]


def _module_source() -> str:
    """The compiled module's text. It names the block shape, the vector width and the digest of the intrinsics'
    code, so a change of any makes a new cache entry."""
    header = codegen.header("serial") + "import numpy as np\nfrom numba import carray, cfunc, types\n"
    header += "from numpy.lib.stride_tricks import as_strided\nfrom numbagrad.backend import codegen, row_products\n"
    header += f'BLOCK_CODE = "{intrinsics_digest()}"\nVECTOR_BYTES = {vector_bytes()}\nSHARE_FIELDS = {SHARE_FIELDS}\n'
    header += f"CHUNK_DEPTH = {CHUNK_DEPTH}\nCHUNK_ROWS = {CHUNK_ROWS}\n"
    copies = [codegen.kind_source(ROW_COPIES, kind, kind_words(kind)) for kind in ("f64", "f32")]
    return "\n".join([header, *copies, _source("f64", vector_bytes()), _source("f32", vector_bytes())])


def _loops():
    """The compiled module (built once per process; its kernels come from Numba's disk cache)."""
    global _module
    if _module is None:
        _module = codegen.load_module("row_products", _module_source())
    return _module


def kind_words(kind: str) -> dict:
    """The words a compiled module's loops written once for both float kinds (``codegen.kind_source``) use for
    ``kind`` (``"f32"`` or ``"f64"``): its dtype's name (``DTYPE``), element size (``BYTES``) and the lanes of the
    host's SIMD vectors (``LANES``)."""
    size = 4 if kind == "f32" else 8
    return {
        "DTYPE": "float32" if kind == "f32" else "float64",
        "BYTES": str(size),
        "LANES": str(vector_bytes() // size),
    }


def kernel_header(constants: dict) -> str:
    """The start of a compiled module whose loops run this module's intrinsics or product: its imports, the digest
    of this module's text (whose code Numba compiles into those loops, while their cache entry changes only with
    their own text), and ``constants`` as names."""
    header = codegen.header("serial") + "import numpy as np\nfrom numba import carray, cfunc, types\n"
    header += "from numbagrad.backend import codegen, row_products\n"
    header += f'PRODUCT_CODE = "{source_digest()}"\n'
    return header + "".join(f"{name} = {value}\n" for name, value in constants.items())


def product_kernel(kind: str):
    """The compiled ``product_<kind>(a, panels, out)`` (``kind`` ``"f32"`` or ``"f64"``), for compiled loops that
    run products of their own (an LSTM layer's steps). Their module's text must hold ``source_digest()``: Numba
    compiles this kernel into them, and their cache entry changes only with their text."""
    return getattr(_loops(), "product_" + kind)


def source_digest() -> str:
    """The digest of the compiled module's text (with the intrinsics' digest in it)."""
    import hashlib

    return hashlib.sha1(_module_source().encode()).hexdigest()[:16]


def pack(b: np.ndarray) -> np.ndarray:
    """``b`` (``(depth, n)``, float32 or float64, any strides) as ``product`` reads it: ``(panels, depth, W)``,
    each panel ``W`` consecutive columns (a block's width) stored row after row, the last one zero-padded. A
    panel's rows are then consecutive in memory: read in ``b``'s own layout, each step along the shared dimension
    starts a new 4 KiB page at hidden 256 and 1024, where hardware prefetchers stop (the kernel took 108-112 us in
    an LSTM layer's loop there, against 93 alone; on the panels 95-99). A Numba loop copies it along ``b``'s rows
    where they are contiguous (32 us for 1 MiB); a transposed ``b`` (``W.T``) goes in square tiles through
    ``transpose_intrinsic`` (41 us for 1 MiB; a scalar loop took 172, numpy's strided copy 252). From
    ``SHARED_PACK_BYTES`` on, with more than one free thread, each packs its share of the panels (an LSTM layer's
    ``W_hh``, 1 MiB, packed 170-250 us in its step on one thread, out of the cache)."""
    depth, n = b.shape
    panels = _empty_panels(depth, n, b.dtype)
    if not panels.size:
        return panels
    module = _loops()
    single = b.dtype == _FLOAT32
    threads = min(cpu_threads.free_threads(), len(panels)) if panels.nbytes >= SHARED_PACK_BYTES else 1
    if threads > 1:
        fields = np.zeros(SHARE_FIELDS, np.int64)
        fields[[2, 5, 7, 12, 13, 14]] = depth, panels.ctypes.data, n, b.ctypes.data, *b.strides
        cpu_threads.run_compiled_shares((module.pack_share_f32 if single else module.pack_share_f64).address,
                                        fields, 8, 9, len(panels), threads)  # fmt: skip
    else:
        (module.pack_f32 if single else module.pack_f64)(b, panels)
    return panels


def _empty_panels(depth: int, columns: int, dtype: np.dtype) -> np.ndarray:
    """An uninitialized array of ``pack``'s shape for a ``(depth, columns)`` ``b``."""
    width = panel_width(dtype)
    return np.empty((-(-columns // width), depth, width), dtype)


def panel_width(dtype: np.dtype) -> int:
    """The columns of one of ``pack``'s panels (a register block's width) for ``dtype``."""
    return VECTORS * vector_bytes() // np.dtype(dtype).itemsize


def product(a: np.ndarray, panels: np.ndarray, columns: int, out: np.ndarray | None = None,
            bias: np.ndarray | None = None, unpacked: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """``a @ b`` for 2-D float32 or float64 ``a`` (strided in any way, in whole elements), ``b`` of the same dtype
    given as ``pack(b)`` with its ``columns``, into ``out``: a new array, or a given ``(len(a), columns)`` one of
    that dtype with unit column stride (a block of a larger result's columns). With ``bias`` (``columns`` values of
    that dtype), ``a @ b + bias``: each sum rounded, then the bias added, as the product and an add would round
    them, but the output written once. With more than one thread (``cpu_threads``), a product of at least
    ``SHARED_WORK`` multiply-adds into a new ``out`` has its panels shared among them, each thread's share run by
    the compiled ``share_<kind>`` (no Python on the workers): (20, 256) x (256, 1024) on 2 threads 57 us against 95
    on one and OpenBLAS's 127. (Python tasks instead cost more than they saved: the 2-layer LSTM's layers took
    47.3 ms so against 39.0 on one thread.) ``a`` may be strided there too: a weight gradient's ``g.T @ x`` is
    shared as it is. With ``unpacked`` (``b`` itself), ``panels`` is an empty array of ``pack``'s shape for it,
    packed here; where the product is shared, each thread packs its own panels, which it then reads from its own
    cache. The LSTM's step on 2 threads packed 2.6-3.2 ms of its 40 on one thread before its products; so, its
    (1024, 700) x (700, 256) weight gradient took 1.79 ms with the packing against 1.95-2.10 without, and its
    eleven products 20.8 ms against 23.8 with their packs."""
    if out is None:
        out = np.empty((a.shape[0], columns), a.dtype)
    # (the kernel reads and writes through raw addresses: what it assumes is checked here)
    made_by_pack = panels.ndim == 3 and panels.flags.c_contiguous and panels.shape[2] == panel_width(a.dtype)
    if not (a.dtype == panels.dtype == out.dtype and made_by_pack):
        raise ValueError("row_products.product: a, panels and out need one dtype, panels as pack makes them")
    if (
        a.shape[1] != panels.shape[1]
        or out.shape != (a.shape[0], columns)
        or columns > panels.shape[0] * panels.shape[2]
    ):
        raise ValueError("row_products.product: the shapes of a, panels, columns and out do not agree")
    if out.size and out.shape[1] > 1 and out.strides[1] != out.itemsize:
        raise ValueError("row_products.product: out needs unit column stride")
    if any(stride % a.itemsize for stride in a.strides):
        raise ValueError("row_products.product: a's strides must be whole elements")
    if bias is not None:
        if bias.dtype != a.dtype or bias.shape != (columns,):
            raise ValueError("row_products.product: bias needs the columns' count of values in a's dtype")
        padded = np.zeros(panels.shape[0] * panels.shape[2], a.dtype)  # (the last panel's columns past b's: 0)
        padded[:columns] = bias
        bias = padded
    if unpacked is not None and unpacked.shape != (panels.shape[1], columns):
        raise ValueError("row_products.product: the unpacked b does not have the panels' shape")
    if not out.size:
        return out
    module = _loops()
    single = a.dtype == _FLOAT32
    threads = min(cpu_threads.free_threads(), len(panels))
    if threads > 1 and out.size * a.shape[1] >= SHARED_WORK and out.flags.c_contiguous:
        # (each address read once: ``.ctypes.data`` costs a microsecond, six of them a third of the hand-off)
        rows, depth = a.shape
        fields = (a.ctypes.data, rows, depth, a.strides[0] // a.itemsize, a.strides[1] // a.itemsize)
        fields += (panels.ctypes.data, out.ctypes.data, columns, 0, 0)  # (the share's first panel and count: 8, 9)
        fields += (0, 0) if bias is None else (bias.ctypes.data, len(bias))
        fields += (0, 0, 0) if unpacked is None else (unpacked.ctypes.data, *unpacked.strides)
        function = (module.share_f32 if single else module.share_f64).address
        cpu_threads.run_compiled_shares(function, np.array(fields, np.int64), 8, 9, len(panels), threads)
        return out
    if unpacked is not None:
        (module.pack_f32 if single else module.pack_f64)(unpacked, panels)
    if bias is None:
        (module.product_f32 if single else module.product_f64)(a, panels, out)
    else:
        (module.product_with_bias_f32 if single else module.product_with_bias_f64)(a, panels, bias, out)
    return out


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` (``+ bias``, see ``product``) for 2-D float32 or float64 operands of one dtype, strided in any
    way: ``b`` packed, then ``product`` (which packs it, on each thread its share)."""
    return product(a, _empty_panels(*b.shape, b.dtype), b.shape[1], bias=bias, unpacked=b)
