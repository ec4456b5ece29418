# Exhaustive model of main's async epilogue since the held-stage merge (end mark in the slot, no
# arrival on epi_full): epi_full (256 arrivals), epi_empty[0] (1 arrival), the two slots, the held stages'
# empty arrivals, the consumers' named barrier 1, and the storer's wait-or-poll (engine_mbar_wait_unless).
# mbarrier: completion count c; try_wait.parity(P) true iff (c & 1) != P.
#
# Consumer actors (the 256 threads split where their code differs):
#   A0 = thread 128 (wg0 leader: writes the slot), A1 = wg0's other threads,
#   A2 = thread 256 (wg1 leader: arrives on empty[held]), A3 = wg1's other threads.
# Tile pattern: 'A' async tile, 'S' non-async tile whose epilogue has a 256-thread named barrier,
# 'P' non-async tile with none (touches nothing modelled).
# Storer: WAIT(i): try_wait -> READ (phase i done) or POLL; POLL: volatile slot read: < 0 -> END, else WAIT.
#   READ: slot value; ESTAGE: arrive empty[stage]; EEMPTY: arrive epi_empty[0]; -> WAIT(i + 1).
# Slot values: tile i writes i (stands for w * kStages + held, >= 0), end writes -1, init 0.
import itertools, sys

NACT = 4
MUT = set()  # mutations, to check that the model catches known faults


def progs(pattern):
    P = [[] for _ in range(NACT)]
    i = 0
    for t in pattern:
        if t == 'P':
            continue
        for a in range(NACT):
            P[a].append(('SYNC',))
        if t == 'S':
            continue
        for a in range(NACT):
            if a == 2:
                P[a].append(('STAGE_ARR', i))  # thread 256: empty[held] (both warpgroups' MMAs done)
            if a >= 2 and i > 0 and 'nowaite' not in MUT:
                P[a].append(('WAITE', i - 1))  # epi_empty[0] completion i - 1 (count >= i)
            if a == 0:
                P[a].append(('SLOT', i, i))
            P[a].append(('ARR', i))  # epi_full
        i += 1
    n = i
    for a in range(NACT):
        if 'nofinsync' not in MUT:
            P[a].append(('SYNC',))  # epi_finish
    P[0].append(('SLOT', n, -1))
    if 'oldend' in MUT:  # the previous version: the end mark also arrives on epi_full
        for a in range(NACT):
            P[a].append(('ARR', n))
    return P, n


def run(pattern):
    P, n = progs(pattern)
    # state: pcs, syncs, fcnt (epi_full completions), fpend, ecnt (epi_empty completions),
    #        slots ((val, writer_tile) x2), storer (mode, i, v), stage_arrs (per tile: frozenset of who),
    #        reads (set of tiles whose slot the storer read)
    iv = -1 if 'noinit' in MUT else 0
    init = ((0,) * NACT, (0,) * NACT, 0, NACT, 0, ((iv, None), (iv, None)), ('WAIT', 0, None),
            tuple(() for _ in range(n)), frozenset())
    seen = set()
    stack = [init]
    bad = {}
    classes = {}  # proj -> [a state, has an edge out of the WAIT/POLL toggle]

    def flag(kind, st, extra=None):
        bad.setdefault(kind, (st, extra))

    def proj(st):
        s = st[6]
        return st[:6] + ((('WAITPOLL' if s[0] in ('WAIT', 'POLL') else s[0]), s[1], s[2]),) + st[7:]

    while stack:
        st = stack.pop()
        if st in seen:
            continue
        seen.add(st)
        pcs, syncs, fcnt, fpend, ecnt, slots, sto, sarr, reads = st
        succ = []
        for a in range(NACT):
            pc = pcs[a]
            if pc >= len(P[a]):
                continue
            if syncs[a] > min(syncs):  # held at the named barrier until every actor got there
                continue
            op = P[a][pc]
            npcs = list(pcs); npcs[a] += 1; npcs = tuple(npcs)
            if op[0] == 'SYNC':
                sc = list(syncs); sc[a] += 1
                succ.append((npcs, tuple(sc), fcnt, fpend, ecnt, slots, sto, sarr, reads))
            elif op[0] == 'STAGE_ARR':
                sa = list(sarr); sa[op[1]] = sa[op[1]] + ('wg1',)
                succ.append((npcs, syncs, fcnt, fpend, ecnt, slots, sto, tuple(sa), reads))
            elif op[0] == 'WAITE':
                c = op[1]
                if (ecnt & 1) != (c & 1):
                    if ecnt != c + 1:
                        flag('wg1 passed epi_empty wait at the wrong count', st, (a, op, ecnt))
                    succ.append((npcs, syncs, fcnt, fpend, ecnt, slots, sto, sarr, reads))
            elif op[0] == 'SLOT':
                i, val = op[1], op[2]
                j = i & 1
                prev_tile = slots[j][1]
                if prev_tile is not None and prev_tile not in reads:
                    flag('slot overwritten before the storer read it', st, (op, prev_tile))
                if sto[0] in ('READ',) and sto[1] == i - 2:
                    flag('slot overwritten while the storer is about to read tile i-2', st, op)
                s = list(slots); s[j] = (val, i if val >= 0 else 'end'); s = tuple(s)
                succ.append((npcs, syncs, fcnt, fpend, ecnt, s, sto, sarr, reads))
            elif op[0] == 'ARR':
                if fcnt != op[1]:
                    flag('arrival lands in the wrong epi_full phase', st, (a, op, fcnt))
                nc, npd = fcnt, fpend - 1
                if npd == 0:
                    nc, npd = fcnt + 1, NACT
                succ.append((npcs, syncs, nc, npd, ecnt, slots, sto, sarr, reads))
        mode, i, v = sto
        if mode == 'WAIT':
            if fcnt not in (i, i + 1):
                flag('storer two phases off epi_full (parity ambiguous)', st, (i, fcnt))
            if (fcnt & 1) != (i & 1):  # try_wait true
                if fcnt != i + 1:
                    flag('storer passed epi_full wait with phase mismatch', st, (i, fcnt))
                succ.append(st[:6] + (('READ', i, None),) + st[7:])
            else:
                succ.append(st[:6] + (('POLL', i, None),) + st[7:])
        elif mode == 'POLL':
            val, wt = slots[i & 1]
            if val < 0:
                if i < n:
                    flag('false end (tile i exists)', st, (i, n))
                if i > n:
                    flag('storer past n', st, (i, n))
                succ.append(st[:6] + (('END', i, None),) + st[7:])
            else:
                succ.append(st[:6] + (('WAIT', i, None),) + st[7:])
        elif mode == 'READ':
            val, wt = slots[i & 1]
            if val != i:
                flag('storer read a wrong slot value', st, (i, val, wt))
            succ.append(st[:6] + (('ESTAGE', i, val),) + st[7:8] + (reads | {i},))
        elif mode == 'ESTAGE':
            sa = list(sarr)
            if 0 <= v < n:
                sa[v] = sa[v] + ('storer',)
            else:
                flag('storer arrives on a bogus stage', st, v)
            succ.append(st[:6] + (('EEMPTY', i, v),) + (tuple(sa),) + st[8:])
        elif mode == 'EEMPTY':
            succ.append(st[:4] + (ecnt + 1, slots, ('WAIT', i + 1, None)) + st[7:])
        # END: nothing more
        done = all(pcs[a] == len(P[a]) for a in range(NACT)) and mode == 'END'
        if done:
            if i != n:
                flag('storer ended at the wrong tile', st, (i, n))
            for t in range(n):
                if sorted(sarr[t]) != ['storer', 'wg1']:
                    flag('held stage arrivals wrong', st, (t, sarr[t]))
            if len(reads) != n:
                flag('lost tile', st, reads)
            continue
        pj = proj(st)
        classes.setdefault(pj, [st, False])
        if any(proj(s2) != pj for s2 in succ):
            classes[pj][1] = True
        stack.extend(succ)
    for pj, (st, exits) in classes.items():
        if not exits and not (st[6][0] == 'END' and all(st[0][a] == len(P[a]) for a in range(NACT))):
            flag('DEADLOCK/hang', st)
    return bad, len(seen), n


if __name__ == '__main__':
    total = 0
    # (1) n = 0..4 async tiles in a row
    for n in range(0, 5):
        bad, ns, _ = run('A' * n)
        total += len(bad)
        print('A*%d states=%d' % (n, ns), sorted(bad) or 'ok')
        for k, (s, e) in bad.items():
            print('   ', k, e, s)
    # (2) interleavings with non-async tiles: every pattern over {A, S, P} up to length 6 (A count <= 4)
    cnt = 0
    worst = 0
    for L in range(1, 7):
        for pat in itertools.product('ASP', repeat=L):
            pat = ''.join(pat)
            if pat.count('A') > 4:
                continue
            bad, ns, n = run(pat)
            cnt += 1
            worst = max(worst, ns)
            if bad:
                total += len(bad)
                print(pat, sorted(bad))
    print('mixed patterns checked:', cnt, 'max states', worst)
    print('TOTAL problems:', total)
