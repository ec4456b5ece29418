# tools/wip: checks on paper the stmatrix TMA-store epilogue of device/gemm/epilogue.cuh (on main since
# 2026-12-02; run: python3 tools/wip/stmatrix_sim.py).
# Simulates old (quad_pack + 16-byte stores) and new (stmatrix .x4) epilogue writes
# of one warpgroup into the 64x64 bf16 SW128 boxes, at 16-bit-element granularity.
kBlockN, kTmaStoreCols = 256, 64

def wgmma_elem(t, i):
    """wgmma m64nNk16 f32 D fragment (PTX / CUTLASS CLayout_64xN): acc[i] of thread t -> (row, col)."""
    w, l = t // 32, t % 32
    j, h, e = i // 4, (i // 2) % 2, i % 2
    return (16 * w + l // 4 + 8 * h, 8 * j + 2 * (l % 4) + e)

def pack(t, a, b):  # pack_bf16x2(acc[a], acc[b]): low half = acc[a] (cvt.rn.bf16x2 %0, b, a)
    return (wgmma_elem(t, a), wgmma_elem(t, b))  # (low, high)

def quad_transpose(vs):  # vs[lane] = list of 4 regs; the rotation version of device/fragment.cuh (56fc224)
    out = []
    for lane in range(32):
        q = lane & 3
        w = list(vs[lane])
        for r in range(1, 4):
            src = (lane & ~3) | ((q + r) & 3)
            give = ((src & 3) - r) & 3  # what lane `src` sends (its q = src&3)
            got = vs[src][give]
            k = (q + r) & 3
            w[k] = got
        out.append(w)
    return out

def store(img, addr, words, box):
    for k, (lo, hi) in enumerate(words):
        for half, el in ((0, lo), (1, hi)):
            a = addr + 4 * k + 2 * half
            assert 0 <= a < 8192, a
            key = (box, a)
            assert key not in img, ("double write", key)
            img[key] = el

def old_path():
    img = {}
    for c in range(kBlockN // kTmaStoreCols):
        for h in range(2):
            for gg in range(kTmaStoreCols // 32):
                g = c * (kTmaStoreCols // 32) + gg
                for w in range(4):
                    v = [[pack(32 * w + l, 4 * (4 * g + i) + 2 * h, 4 * (4 * g + i) + 2 * h + 1) for i in range(4)]
                         for l in range(32)]
                    v = quad_transpose(v)
                    for l in range(32):
                        t = 32 * w + l
                        row = w * 16 + l // 4 + 8 * h  # frag_row(0, h)
                        chunk = 4 * gg + (l & 3)
                        store(img, row * kTmaStoreCols * 2 + ((chunk ^ (row & 7)) << 4), v[l], c)
    return img

def new_path():
    img = {}
    for c in range(kBlockN // kTmaStoreCols):
        for q in range(kTmaStoreCols // 16):
            j = c * (kTmaStoreCols // 8) + 2 * q
            for w in range(4):
                addrs, regs = [], []
                for l in range(32):
                    t = 32 * w + l
                    row = w * 16 + (l & 7) + 8 * ((l >> 3) & 1)
                    blk = l >> 4
                    chunk = 2 * q + blk
                    addrs.append(row * kTmaStoreCols * 2 + ((chunk ^ (row & 7)) << 4))
                    regs.append([pack(t, 4 * j + 2 * m, 4 * j + 2 * m + 1) for m in range(4)])
                # stmatrix.m8n8.x4.b16: matrix m, row r at addrs[8m + r]; element pair (r, 2k..2k+1)
                # from lane 4r + k, register m (low half = lower column).
                for m in range(4):
                    for r in range(8):
                        words = [regs[4 * r + k][m] for k in range(4)]
                        store(img, addrs[8 * m + r], words, c)
    return img

def expected():
    # TMA SWIZZLE_128B box of 64 rows x 128 bytes, 1024-aligned: logical (r, col) at
    # r*128 + ((col/8 ^ r%8) << 4) + (col%8)*2; box c holds tile columns 64c..64c+63.
    img = {}
    for c in range(4):
        for r in range(64):
            for col in range(64):
                img[(c, r * 128 + (((col // 8) ^ (r % 8)) << 4) + (col % 8) * 2)] = (r, 64 * c + col)
    return img

def main():
    old, new, exp = old_path(), new_path(), expected()
    print("elements written: old", len(old), "new", len(new), "expected", len(exp))
    diff_on = [k for k in exp if old.get(k) != new.get(k)]
    print("old vs new mismatches:", len(diff_on))
    print("old vs expected (SW128 logical) mismatches:", sum(old.get(k) != v for k, v in exp.items()))
    print("new vs expected (SW128 logical) mismatches:", sum(new.get(k) != v for k, v in exp.items()))
    # every acc element of every thread used exactly once
    used = sorted(set(new.values()))
    print("distinct tile elements stored by new:", len(used), "(64*256 =", 64 * 256, ")")
    # 16-byte alignment of each stmatrix row address and bank groups per 8-row matrix
    ok_align, conflicts = True, 0
    for c in range(4):
        for q in range(4):
            for w in range(4):
                for m in range(4):
                    rows = []
                    for r in range(8):
                        l = 8 * m + r
                        row = w * 16 + (l & 7) + 8 * ((l >> 3) & 1); chunk = 2 * q + (l >> 4)
                        a = row * 128 + ((chunk ^ (row & 7)) << 4)
                        ok_align &= a % 16 == 0
                        rows.append((a // 16) % 8)
                    conflicts += len(rows) - len(set(rows))
    print("all row addresses 16-byte aligned:", ok_align, "; same-bank-group rows within a matrix:", conflicts)


if __name__ == "__main__":
    main()
