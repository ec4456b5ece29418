# tools/wip: checks on paper the butterfly quad_transpose of device/fragment.cuh (on main since 2026-12-02).
# Run: python3 tools/wip/quad_butterfly_sim.py. The rotation quad_transpose it replaced (modelled in
# stmatrix_sim.py) against the butterfly version, all 32 lanes, symbolic values.
from stmatrix_sim import quad_transpose as old  # the model of device/fragment.cuh at 56fc224


def bfly(vs):
    v = [list(x) for x in vs]
    for t in range(2):  # stage 1: xor 2
        send = [v[l][t] if l & 2 else v[l][t + 2] for l in range(32)]
        for l in range(32):
            got = send[l ^ 2]
            if l & 2: v[l][t] = got
            else: v[l][t + 2] = got
    for t in (0, 2):  # stage 2: xor 1
        send = [v[l][t] if l & 1 else v[l][t + 1] for l in range(32)]
        for l in range(32):
            got = send[l ^ 1]
            if l & 1: v[l][t] = got
            else: v[l][t + 1] = got
    return v

vs = [[(lane, i) for i in range(4)] for lane in range(32)]
o, b = old(vs), bfly(vs)
want = [[((lane & ~3) | k, lane & 3) for k in range(4)] for lane in range(32)]  # w[k] = lane k's v[q]
print("old == transpose:", o == want, "| butterfly == transpose:", b == want, "| butterfly == old:", b == o)
print("own inverse:", bfly(bfly(vs)) == vs)
