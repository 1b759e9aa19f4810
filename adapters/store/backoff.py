"""How long a writer waits before trying a batch again: the waiting half of
`domain.application.RetryPolicy`.

Design decision: the application decides what a retry means (decide the batch again after a lost
race, insert again after an outage) and this adapter, which knows the stores are shared and remote,
decides the pauses. Lost races back off with random jitter, growing with each attempt, so writers
that collided do not collide again in step; an absent server is waited for longer, up to two seconds
between attempts (a restart or failover).
"""

from __future__ import annotations

import random
import time

ATTEMPTS = 8


class StoreBackoff:
    attempts = ATTEMPTS

    def after_lost_race(self, attempt: int) -> None:
        time.sleep(random.uniform(0.005, 0.05) * attempt)

    def after_store_away(self, attempt: int) -> None:
        time.sleep(min(2.0, 0.25 * attempt))
