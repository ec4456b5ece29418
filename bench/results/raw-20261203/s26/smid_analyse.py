#!/usr/bin/env python3
"""Session 26: where the network benchmark's blocks ran (agents_d.sh's smid_*.log, from .carry/smid's mkbench).

Per log: the net_bw rates (GB/s at 1 MB and 4 MB), the SMs each rank's blocks used over the run, their overlap,
and per rank-0 launch whether its agent's SM (block 0) was also used by a block of rank 1's launch that started
within 50 us, or by another block of its own launch.
Usage: smid_analyse.py LOG...
"""
import re
import sys

LINE = re.compile(r"smid rank (\d+) block (\d+) of (\d+) sm (\d+) t (\d+)")
ROW = re.compile(r"^\| emu .*?\|\s+(\d+) KB \|\s+\d+ \|\s+[\d.]+ \|\s+([\d.]+) \|")


def launches(recs, rank):
    """Groups one rank's block records into launches: a block 0 .. G-1 set started within 20 us."""
    out, cur = [], []
    for r in sorted((x for x in recs if x[0] == rank), key=lambda x: x[4]):
        if cur and (r[4] - cur[0][4] > 20000 or any(c[1] == r[1] for c in cur)):
            out.append(cur)
            cur = []
        cur.append(r)
    if cur:
        out.append(cur)
    return out


for path in sys.argv[1:]:
    recs, rates = [], {}
    for line in open(path, errors="replace"):
        m = LINE.search(line)
        if m:
            recs.append(tuple(int(g) for g in m.groups()))
        m = ROW.search(line)
        if m:
            rates[int(m.group(1))] = float(m.group(2))
    l0, l1 = launches(recs, 0), launches(recs, 1)
    sm0 = {r[3] for r in recs if r[0] == 0}
    sm1 = {r[3] for r in recs if r[0] == 1}
    shared_other = shared_own = n = 0
    for L in l0:
        agent = [r for r in L if r[1] == 0]
        if not agent:
            continue
        a = agent[0]
        n += 1
        near = [x for M in l1 for x in M if abs(x[4] - a[4]) < 50000]
        shared_other += any(x[3] == a[3] for x in near)
        shared_own += any(r[3] == a[3] and r[1] != 0 for r in L)
    agent_sms = sorted({r[3] for L in l0 for r in L if r[1] == 0})
    print(f"{path}: 1 MB {rates.get(1024, 0):.1f} GB/s, 4 MB {rates.get(4096, 0):.1f} GB/s; "
          f"rank 0 used {len(sm0)} SMs ({min(sm0, default=-1)}-{max(sm0, default=-1)}), rank 1 {len(sm1)} "
          f"({min(sm1, default=-1)}-{max(sm1, default=-1)}), both {len(sm0 & sm1)}; rank 0 launches {n}: agent's SM "
          f"also rank 1's (within 50 us) in {shared_other}, also its own sender's in {shared_own}; "
          f"agent SMs {agent_sms[:12]}{'...' if len(agent_sms) > 12 else ''}")
