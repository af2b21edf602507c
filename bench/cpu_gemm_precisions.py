#!/usr/bin/env python3
"""Why lower precision does or does not pay on this CPU: the matrix products and the elementwise
activation of our networks, timed alone in float32, bfloat16 and float16 (one thread), and the
oneDNN kernel that PyTorch picks for each (ONEDNN_VERBOSE). The shapes are those of the default
potential's networks (hidden 32 and the first layer's 38 inputs, 512 atoms x 4 members) and of
bench_mixed_precision_step's MLPs (widths 64 and 256, 4096 atoms).

Interpreter: a python with torch, e.g. $(bench/setup-peer.sh) for PyPI's torch 2.15.0 or
/usr/bin/python3 for Debian's 1.13. Writes --out FILE as well as printing.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

SHAPES = [(2048, 38, 32), (2048, 32, 32), (4096, 64, 64), (4096, 256, 256)]


def timed(function, repeats=30):
    function()
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats * 1e3


def measure():
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    backend = getattr(torch.backends, "cpu", None)
    capability = backend.get_cpu_capability() if backend is not None else "not reported"
    lines = [f"# torch {torch.__version__}, CPU capability {capability}, "
             "1 thread; ms per call (linear: M x K input, N x K weight)",
             f"{'M x K x N':<16} {'linear f32':>10} {'bf16':>7} {'f16':>7} {'silu f32':>9} {'bf16':>7} {'cast to bf16':>12}"]
    for m, k, n in SHAPES:
        x, w, h = torch.randn(m, k), torch.randn(n, k), torch.randn(m, n)
        row = [timed(lambda: torch.nn.functional.linear(x, w))]
        for dtype in (torch.bfloat16, torch.float16):
            xl, wl = x.to(dtype), w.to(dtype)
            try:
                row.append(timed(lambda: torch.nn.functional.linear(xl, wl)))
            except RuntimeError:  # torch 1.13 has no CPU float16 matrix product
                row.append(float("nan"))
        hb = h.bfloat16()
        row += [timed(lambda: torch.nn.functional.silu(h)), timed(lambda: torch.nn.functional.silu(hb)),
                timed(lambda: x.bfloat16())]
        lines.append(f"{f'{m} x {k} x {n}':<16} {row[0]:10.3f} {row[1]:7.3f} {row[2]:7.3f} {row[3]:9.3f} "
                     f"{row[4]:7.3f} {row[5]:12.3f}")
    return lines


def kernels():
    """The oneDNN ISA line and the matmul implementation per dtype, from a child with ONEDNN_VERBOSE."""
    code = ("import torch\ntorch.set_num_threads(1)\n"
            "for d in (torch.bfloat16, torch.float16):\n"
            "    try: torch.nn.functional.linear(torch.randn(4096, 256).to(d), torch.randn(256, 256).to(d))\n"
            "    except RuntimeError: pass\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1", OMP_NUM_THREADS="1"))
    found = []
    for line in out.stdout.splitlines():
        fields = line.split(",")
        if ",info,cpu,isa:" in line:
            found.append("# oneDNN " + fields[-1])
        for primitive in ("matmul", "inner_product", "gemm_api"):
            if ",exec," in line and primitive in fields:
                source = next((f.split(":")[1] for f in fields if f.startswith("src")), "?")
                found.append(f"# oneDNN {primitive} {fields[-2]} from {source}: {fields[fields.index(primitive) + 1]}, "
                             f"{float(fields[-1]):.2f} ms")
    return found or ["# oneDNN printed nothing: this torch's CPU bfloat16/float16 products do not go through oneDNN"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    args = parser.parse_args()
    text = "\n".join(measure() + kernels())
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
