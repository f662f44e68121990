"""Figures the reliability tests gather, printed at the end of the run (docs/reliability.md
quotes them)."""

from __future__ import annotations

from collections import defaultdict

FIGURES: dict[str, dict[str, int]] = defaultdict(dict)


def add(scenario: str, **figures: int) -> None:
    """Record figures of one scenario (added up when the scenario repeats)."""
    for name, value in figures.items():
        FIGURES[scenario][name] = FIGURES[scenario].get(name, 0) + value


def lines() -> list[str]:
    """The summary, one line per scenario."""
    return [
        f"{scenario}: " + ", ".join(f"{name} {value}" for name, value in figures.items())
        for scenario, figures in sorted(FIGURES.items())
    ]
