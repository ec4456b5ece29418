"""The op plans' cache bound (MK_PLAN_CACHE_MAX), without torch so that the CPU tests reach it
(tests/python/test_package.py). The cache itself is mkernel.tp._PLANS: a dict from (plan class name,
communicator key, shape) to the plan, in the order the plans were made. Every rank makes its plans
in the same order (making one is collective), so closing the oldest ones closes the same plans on
every rank, in the same order, as their collective close needs."""


def close_oldest(plans, comm_key, limit, before_closing=None, keep=None):
    """Closes and removes the oldest plans of communicator `comm_key` in `plans` until fewer than
    `limit` remain, so that one more fits; limit <= 0: none. Plans for which keep(plan) is true are
    never closed (mkernel.tp: those a CUDA graph on some rank still holds, which a replay uses:
    held_by_graphs, the same answer on every rank): they count towards the bound, and
    the oldest others go in their place, as many as there are. before_closing(), if given, runs once
    before the first close (the caller drops what holds their launches). Returns (closed, short): how
    many it closed, and how many more it would have closed but for keep."""
    if limit <= 0:
        return 0, 0
    # A snapshot of the keys (list(dict) copies them at once): another thread may add plans of its own
    # communicator meanwhile, and iterating the dict itself would then fail on this rank alone.
    mine = [k for k in list(plans) if k[1] == comm_key]
    want = max(0, len(mine) - limit + 1)
    doomed = [k for k in mine if keep is None or not keep(plans[k])][:want]
    if doomed and before_closing is not None:
        before_closing()
    for k in doomed:
        plans.pop(k).close()
    return len(doomed), want - len(doomed)


def held_by_graphs(plans, comm_key, limit, allgather):
    """keep() for close_oldest (mkernel.tp): the plans that a CUDA graph on some rank still holds (a replay would
    use them). Which plans were ever captured is the same on every rank, as they capture the same graphs; whether
    a graph still holds one is not (each rank destroys its graphs, and CUDA says so a moment later). So where the
    bound is about to close a plan that was captured, the ranks OR their plans' graphs_alive in one exchange
    (allgather(bytes) -> the bytes of every rank; collective: every rank gets here, as every rank makes the
    plan, and decides alike whether to exchange). None (keep nothing) where no captured plan is among the oldest
    ones the bound closes."""
    if limit <= 0:
        return None
    mine = [k for k in list(plans) if k[1] == comm_key]
    want = len(mine) - limit + 1  # (close_oldest's count)
    if want <= 0 or not any(plans[k].captured for k in mine[:want]):
        return None  # (the oldest `want` go either way: no exchange)
    captured = [k for k in mine if plans[k].captured]
    flags = allgather(bytes(1 if plans[k].graphs_alive else 0 for k in captured))
    held = {id(plans[k]) for i, k in enumerate(captured) if any(f[i] for f in flags)}
    return lambda plan: id(plan) in held


def start_over_at(cache, limit=4096):
    """Empties `cache` (a dict or set) once it holds `limit` entries: the side caches that grow by one per
    distinct shape (mkernel.tp's shape rules, its closed-plan keys) under varying shapes."""
    if len(cache) >= limit:
        cache.clear()
