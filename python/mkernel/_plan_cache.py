"""The op plans' cache bound (MK_PLAN_CACHE_MAX), without torch so that the CPU tests reach it
(tests/python/test_package.py). The cache itself is mkernel.tp._PLANS: a dict from (plan class name,
communicator key, shape) to the plan, in the order the plans were made. Every rank makes its plans
in the same order (making one is collective), so closing the oldest ones closes the same plans on
every rank, in the same order, as their collective close needs."""


def close_oldest(plans, comm_key, limit, before_closing=None, keep=None):
    """Closes and removes the oldest plans of communicator `comm_key` in `plans` until fewer than
    `limit` remain, so that one more fits; limit <= 0: none. Plans for which keep(plan) is true are
    never closed (mkernel.tp: those captured in a CUDA graph, which a replay still uses; every rank
    must see the same answer, as when it captures the same graphs): they count towards the bound, and
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


def start_over_at(cache, limit=4096):
    """Empties `cache` (a dict or set) once it holds `limit` entries: the side caches that grow by one per
    distinct shape (mkernel.tp's shape rules, its closed-plan keys) under varying shapes."""
    if len(cache) >= limit:
        cache.clear()
