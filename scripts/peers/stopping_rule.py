"""When a peer stops timing a case: attnbench's own rule (harness/measure/timing.cpp), so the
peer's medians carry the same precision as the harness's records beside them.

A repetition is as many calls as fill measure.min_time_s (counted from one probe call); every
call is a sample. At least measure.repetitions repetitions (and at least the peer's --repeats
calls); with measure.target_rel_ci > 0, repetitions are added until the median's 95% interval
is within that fraction of it, or measure.max_time_s of timed calls are spent. The interval is
the harness's (harness/measure/statistics.cpp: the narrowest symmetric order-statistic interval
with coverage >= 95%); `attnbench append` computes the record's own from the samples, and the
tests hold the two equal."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

# As harness/measure/timing.h: the most calls one repetition takes.
MAX_CALLS_PER_REPETITION = 1_000_000


def median_rel_half_width(samples: list[float], confidence: float = 0.95) -> float:
    """Half the width of the median's order-statistic interval over the median; infinity when
    there are too few samples for any interval of that confidence (under 6 at 95%)."""
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        return math.inf
    median = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    tail = (1 - confidence) / 2
    log_half_n = n * math.log(0.5)
    log_n_factorial = math.lgamma(n + 1)
    k, cdf = 0, 0.0
    for candidate in range(1, (n + 1) // 2 + 1):
        i = candidate - 1
        cdf += math.exp(log_n_factorial - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
        if cdf > tail:
            break
        k = candidate
    if k == 0 or not median > 0:
        return math.inf
    return (xs[n - k] - xs[k - 1]) / 2 / median


@dataclasses.dataclass(frozen=True)
class StoppingRule:
    repetitions: int       # measure.repetitions: the fewest repetitions
    min_time_s: float      # measure.min_time_s: seconds per repetition
    target_rel_ci: float   # measure.target_rel_ci: 0, no target
    max_time_s: float      # measure.max_time_s: with a target, the timed seconds to give up at
    min_calls: int = 1     # the peer's --repeats: the fewest calls

    @classmethod
    def of_plan(cls, plan: dict, min_calls: int) -> "StoppingRule":
        """The rule of `attnbench plan --json`'s settings (each with the config's value)."""
        settings = plan["settings"]
        return cls(repetitions=int(settings["measure.repetitions"]["value"]),
                   min_time_s=float(settings["measure.min_time_s"]["value"]),
                   target_rel_ci=float(settings["measure.target_rel_ci"]["value"]),
                   max_time_s=float(settings["measure.max_time_s"]["value"]),
                   min_calls=max(1, min_calls))

    def describe(self) -> str:
        target = (f", more until the median's 95% interval is within ±{100 * self.target_rel_ci:g}% "
                  f"or {self.max_time_s:g} s are spent" if self.target_rel_ci > 0 else "")
        return (f"at least {self.repetitions} repetitions of {self.min_time_s:g} s and "
                f"{self.min_calls} calls{target}")

    def calls_per_repetition(self, probe_ms: float) -> int:
        if not probe_ms > 0:
            return MAX_CALLS_PER_REPETITION
        return int(min(max(math.ceil(self.min_time_s * 1e3 / probe_ms), 1), MAX_CALLS_PER_REPETITION))

    def done(self, samples: list[float], repetitions: int) -> bool:
        if repetitions < self.repetitions or len(samples) < self.min_calls:
            return False
        if self.target_rel_ci <= 0 or median_rel_half_width(samples) <= self.target_rel_ci:
            return True
        return sum(samples) / 1e3 >= self.max_time_s

    def sample(self, time_calls: Callable[[int], list[float]]) -> list[float]:
        """The case's samples (ms per call): time_calls(n) times n calls and returns each one's
        milliseconds; the first, a probe, sets the calls per repetition and is not kept."""
        calls = self.calls_per_repetition(time_calls(1)[0])
        samples: list[float] = []
        repetitions = 0
        while not self.done(samples, repetitions):
            samples += time_calls(calls)
            repetitions += 1
        return samples
