#!/usr/bin/env python3
"""Fails when the ring-attention kernel's consumer K loop (D = 128) runs its per-block bookkeeping on the vector
datapath where the one-GPU attention kernel, which runs the same loop, keeps it on the uniform one.

Why: at 176-key blocks the engine's producer warpgroup has 56 registers, and the ring kernel runs its K/V push
there. Some forms of the push's copy loop (16-byte loads batched in flight, a chunk offset held across its K and
V parts, a 64-bit division) made ptxas move the consumers' loop bookkeeping (segment, block, stage and mask
values) from uniform registers to vector ones and re-load kernel parameters per block: the same instruction
count, 4-6% slower at one rank (bench/results/ring-engine-176-20261202.md). Nothing else reports it (no spill,
no ptxas warning), so this compares the SASS: the uniform-datapath instructions (U*, R2UR) of each kernel's
steady K loop, which must be at least 90% of the one-GPU kernel's (2026-12-02: 167 against 172; the slow
forms: 90).

Usage: check_uniform_loop.py RING_OBJECT ATTENTION_OBJECT. Needs cuobjdump and nvdisasm: the CUDA toolkit's,
or the nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels (tools/setup.sh installs them)."""
import collections
import os
import re
import shutil
import subprocess
import sys


def tool_dirs():
    dirs = []
    if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
        dirs.append(None)  # on PATH
    dirs.append("/usr/local/cuda/bin")
    # The wheels' nvidia/<kit>/bin under every folder on the path: not through `import nvidia`, whose namespace
    # package a regular `nvidia` package elsewhere on the path (an older torch's CUDA 12 wheels have one) hides.
    for entry in sys.path:
        root = os.path.join(entry or ".", "nvidia")
        if os.path.isdir(root):
            dirs += [os.path.join(root, d, "bin") for d in sorted(os.listdir(root))]
    return dirs


def disassemble(obj):
    for d in tool_dirs():
        if d is not None and not (os.path.exists(os.path.join(d, "cuobjdump")) and
                                  os.path.exists(os.path.join(d, "nvdisasm"))):
            continue
        env = dict(os.environ)
        if d is not None:
            env["PATH"] = d + os.pathsep + env.get("PATH", "")
        r = subprocess.run(["cuobjdump", "-sass", obj], capture_output=True, text=True, env=env)
        if r.returncode == 0 and "Function :" in r.stdout:
            return r.stdout
    sys.exit("check_uniform_loop: no working cuobjdump + nvdisasm (CUDA toolkit, or pip install "
             "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm: tools/setup.sh)")


def steady_loop(sass, kernel_part):
    """Opcode counts of the steady K loop of the D = 128 kernel whose name contains kernel_part: from the back
    branch's target to the branch, the branch following the second S = Q K^T wgmma that starts from zero."""
    funcs = [f for f in sass.split("Function : ")[1:] if kernel_part in f.split("\n")[0] and "ILi128E" in f]
    if len(funcs) != 1:
        sys.exit(f"check_uniform_loop: {len(funcs)} D = 128 kernels named *{kernel_part}*")
    lines = funcs[0].split("\n")

    def addr(line):
        m = re.search(r"/\*([0-9a-f]{4,5})\*/", line)
        return int(m.group(1), 16) if m else None

    first_s = [i for i, l in enumerate(lines) if re.search(r"HGMMA\.64x(128|144|176)x16\.F32\.BF16 R\d+, gdesc\[UR\d+\], RZ", l)]
    if len(first_s) < 2:
        sys.exit(f"check_uniform_loop: no steady K loop found in {kernel_part} (update this script)")
    a0 = addr(lines[first_s[1]])
    for l in lines[first_s[1]:]:
        m = re.search(r"BRA (0x[0-9a-f]+)", l)
        if m and int(m.group(1), 16) < a0:
            lo, hi = int(m.group(1), 16), addr(l)
            break
    else:
        sys.exit(f"check_uniform_loop: no back branch after the K loop's wgmma in {kernel_part}")
    ops = collections.Counter()
    for l in lines:
        a = addr(l)
        m = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", l)
        if a is not None and lo <= a <= hi and m:
            ops[m.group(1)] += 1
    return ops


def uniform(ops):
    return sum(v for k, v in ops.items() if k.startswith("U") or k.startswith("R2UR"))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ring = steady_loop(disassemble(sys.argv[1]), "ring_attn_kernel")
    one = steady_loop(disassemble(sys.argv[2]), "attention_kernel")
    ur, uo = uniform(ring), uniform(one)
    what = (f"K loop, uniform-datapath instructions: ring kernel {ur} of {sum(ring.values())}, one-GPU kernel {uo} "
            f"of {sum(one.values())}")
    if ur < 0.9 * uo:
        print(f"FAIL: {what}: the ring kernel's loop left the uniform datapath (see this script's docstring)")
        return 1
    print(f"ok: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
