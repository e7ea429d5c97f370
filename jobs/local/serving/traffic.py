"""An endpoint's traffic split: what a ``trafficSplit`` must be, and which deployed model serves
the next prediction by it. Pure: the local-pure contract keeps processes, servers and files out
of it."""

from __future__ import annotations


def split_problems(split: dict[str, int], known: set[str]) -> list[str]:
    """A trafficSplit: ids of deployed models (``known``), percentages 0..100 summing to 100."""
    problems = [f"trafficSplit: {k!r} is not a deployed model" for k in split if k not in known]
    problems += [
        f"trafficSplit.{k}: {v} is not a percentage"
        for k, v in split.items()
        if not 0 <= int(v) <= 100
    ]
    if split and sum(int(v) for v in split.values()) != 100:
        problems.append(f"trafficSplit: the percentages sum to {sum(split.values())}, not 100")
    return problems


def pick_deployed(split: dict[str, int], order: list[str], current: dict[str, int]) -> str | None:
    """The deployed model of the next prediction, by smooth weighted round robin (nginx's):
    each model's ``current`` credit grows by its percentage, the one with the most credit
    (the first in ``order``, deployedModels order, on a tie) serves and pays 100. Over every
    100 predictions each model serves exactly its percentage, interleaved (50/50 alternates).
    ``current`` is updated in place."""
    shares = {d: int(split.get(d, 0)) for d in order if int(split.get(d, 0)) > 0}
    if not shares:
        return None
    for deployed_id, share in shares.items():
        current[deployed_id] = current.get(deployed_id, 0) + share
    chosen = max(shares, key=lambda d: current[d])  # max keeps the first of equals
    current[chosen] -= sum(shares.values())
    return chosen
