"""What the benchmark prints as it goes, and the summary it ends with: each target's figure and verdict."""
from dataclasses import dataclass

from .targets import TARGETS, Target, format_figure

MET, MISSED, NOT_MEASURED = "met", "MISSED", "NOT MEASURED"


@dataclass
class Outcome:
    target: Target
    figure: float | None = None     # None: not measured (the area failed, or a page raised)
    why: str = ""                   # why it was not measured

    @property
    def verdict(self) -> str:
        if self.figure is None:
            return NOT_MEASURED
        return MET if self.target.met(self.figure) else MISSED


class Report:
    """Collects the figures of the areas that ran; `summary()` and `exit_status()` judge them."""

    def __init__(self, targets: list[Target] = TARGETS):
        self.targets = {t.key: t for t in targets}
        self.outcomes: dict[str, Outcome] = {}
        self.areas_run: list[str] = []

    def start(self, area: str) -> None:
        """An area begins: its targets are expected in the summary from now on."""
        self.areas_run.append(area)

    def line(self, area: str, text: str) -> None:
        """A line of the running output, prefixed by its area."""
        print(f"{area:<8} {text}", flush=True)

    def record(self, key: str, figure: float) -> float:
        """The figure measured for target `key` (kept if not measured already for a reason)."""
        if key not in self.targets:
            raise KeyError(f"no target called {key!r} in bench/targets.py")
        if key not in self.outcomes or self.outcomes[key].figure is not None:
            self.outcomes[key] = Outcome(self.targets[key], float(figure))
        return figure

    def not_measured(self, key: str, why: str) -> None:
        """Target `key` could not be measured (a page raised, a run broke): it counts as a failure."""
        self.outcomes[key] = Outcome(self.targets[key], None, why)

    def area_failed(self, area: str, why: str) -> None:
        """An area stopped with an error: its targets measured so far stand, the others are not measured."""
        for key, target in self.targets.items():
            if target.area == area and key not in self.outcomes:
                self.not_measured(key, why)

    def results(self) -> list[Outcome]:
        """One outcome per target of the areas that ran, in the table's order."""
        return [self.outcomes.get(key) or Outcome(target, None, "the area did not record it")
                for key, target in self.targets.items() if target.area in self.areas_run]

    def summary(self) -> str:
        """The summary table: measure, figure, target, verdict."""
        rows = [("measure", "figure", "target", "verdict")]
        for outcome in self.results():
            t = outcome.target
            figure = format_figure(outcome.figure, t.unit) if outcome.figure is not None else "-"
            verdict = outcome.verdict + (f" ({outcome.why})" if outcome.why else "")
            rows.append((f"{t.area}: {t.measure}", figure, t.describe(), verdict))
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["  ".join([row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2].ljust(widths[2]), row[3]])
                 for row in rows]
        lines.insert(1, "-" * max(len(line) for line in lines))
        missed = sum(o.verdict != MET for o in self.results())
        lines.append(f"{len(self.results()) - missed} of {len(self.results())} targets met"
                     + (f"; {missed} missed or not measured" if missed else ""))
        return "\n".join(lines)

    def exit_status(self) -> int:
        """0 when every target of the areas that ran is met, else 1."""
        return 0 if all(o.verdict == MET for o in self.results()) else 1
