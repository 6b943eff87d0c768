"""What the client modules share: the response check and the two ways of running C at a time.

threads(n, c, one): C threads share one iterator of N tickets; each takes the next and calls
one() until none are left. asyncio_tasks(n, c, one): the same with C tasks on one event loop.
one() returns the body's length (after checking it); the sum is returned with the count.
The first exception stops every worker and is raised again.
"""

import asyncio
import threading

from driver_check import check_body  # noqa: F401  (re-exported for the modules)


def threads(n, c, one, clock):
    tickets = iter(range(n))
    totals = [0] * c
    counts = [0] * c
    errors = []

    def worker(i):
        got = cnt = 0
        try:
            for _ in tickets:  # next() on a range iterator is atomic under the GIL
                if errors:
                    break
                got += one()
                cnt += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        totals[i], counts[i] = got, cnt

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(c)]
    clock.start()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    clock.stop()
    if errors:
        raise errors[0]
    return sum(counts), sum(totals)


async def asyncio_tasks(n, c, one, clock):
    tickets = iter(range(n))
    counts = [0] * c
    totals = [0] * c

    async def worker(i):
        for _ in tickets:
            totals[i] += await one()
            counts[i] += 1

    clock.start()
    await asyncio.gather(*(worker(i) for i in range(c)))
    clock.stop()
    return sum(counts), sum(totals)
