"""The op plans' cache bound (MK_PLAN_CACHE_MAX), without torch so that the CPU tests reach it
(tests/python/test_package.py). The cache itself is mkernel.tp._PLANS: a dict from (plan class name,
communicator key, shape) to the plan, in the order the plans were made. Every rank makes its plans
in the same order (making one is collective), so closing the oldest ones closes the same plans on
every rank, in the same order, as their collective close needs."""


def close_oldest(plans, comm_key, limit, before_closing=None):
    """Closes and removes the oldest plans of communicator `comm_key` in `plans` until fewer than
    `limit` remain, so that one more fits; limit <= 0: none. before_closing(), if given, runs once
    before the first close (the caller drops what holds their launches). Returns how many it closed."""
    if limit <= 0:
        return 0
    mine = [k for k in plans if k[1] == comm_key]
    doomed = mine[:max(0, len(mine) - limit + 1)]
    if doomed and before_closing is not None:
        before_closing()
    for k in doomed:
        plans.pop(k).close()
    return len(doomed)
