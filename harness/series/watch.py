"""``--watch``: poll the training run's folder while a job writes to it, evaluate (or submit) each checkpoint once it
is complete, and stop after ``--idle`` seconds in which nothing happened: no new checkpoint, no file written in
one, no evaluation. A checkpoint is planned again only when it is new or its folder changed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from harness.series.plan import Plan, Unit, make_plan
from harness.series.settings import Settings


class Watch:
    """The polling loop; ``act`` evaluates or submits a plan's runs: (unit key -> failure, how many it started)."""

    def __init__(self, settings: Settings, act: Callable[[Plan], tuple[dict[str, str], int]], first: Plan) -> None:
        self.settings, self.act = settings, act
        # the plan already printed: only changes to it are reported
        self.known: dict[tuple[str | None, Path], Unit] = {(u.task, u.checkpoint.folder): u for u in first.units}
        self.seen = {(u.task, u.checkpoint.folder): (u.changed, u.skipped) for u in first.units}
        self.failures: dict[str, str] = {}
        self.last: Plan | None = None

    def poll(self) -> bool:
        """One look: plan, act on what is new; True when anything happened (new, changed, evaluated)."""
        plan = make_plan(self.settings, self.known)
        self.last = plan
        moved = False
        for u in plan.units:
            key = (u.task, u.checkpoint.folder)
            state = (u.changed, u.skipped)
            if self.seen.get(key) != state:
                moved = True
                if key not in self.seen or self.seen[key][1] != u.skipped:
                    print(f"[series {self.settings.name}] step {u.step}: "
                          + (u.skipped or ("complete, to run" if u.todo else "complete, done")), flush=True)
                self.seen[key] = state
        todo = [u for u in plan.todo if u.key not in self.failures]   # a failed run is tried once per watch
        if todo:
            failures, started = self.act(Plan(plan.settings, todo, plan.ignored))
            self.failures |= failures
            moved = moved or started > 0
        self.known = {(u.task, u.checkpoint.folder): u for u in plan.units}
        return moved

    def run(self) -> dict[str, str]:
        """Poll until ``idle`` seconds pass with nothing happening; unit key -> failure of what failed."""
        s = self.settings
        last = time.monotonic()
        print(f"[series {s.name}] watching {s.root or 'the listed checkpoints'} every {s.poll:g} s; stopping after "
              f"{s.idle:g} s with nothing new (--idle)", flush=True)
        while True:
            if self.poll():
                last = time.monotonic()
            if time.monotonic() - last >= s.idle:
                print(f"[series {s.name}] nothing new for {s.idle:g} s: stopped watching", flush=True)
                return self.failures
            time.sleep(s.poll)
