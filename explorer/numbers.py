"""How the app writes a share or a probability for a class: one rule, everywhere."""
import math


def percent(p: float, digits: int = 3) -> str:
    """`p` as a percentage with `digits` significant digits ("99.9%", "50.0%", "0.0123%"); exactly 0 or 1 is "0%" or
    "100%", and nothing else ever reads so: it gets more decimals (up to 6) until it does not."""
    x = 100 * p
    if p in (0, 1):
        return f"{x:.0f}%"
    decimals = max(0, digits - 1 - math.floor(math.log10(x)))
    while 0 < p < 1 and decimals < 6 and float(f"{x:.{decimals}f}") in (0.0, 100.0):
        decimals += 1
    return f"{x:.{decimals}f}%"


def percents(*probabilities: float) -> tuple[str, ...]:
    """Probabilities as percentages, each with the same number of significant digits (2 to 6): as many as it takes
    for any two that differ to be written differently, so their order shows (0.021% and 0.0048%, not 0.0%)."""
    for digits in range(2, 7):
        shown = tuple(percent(p, digits) for p in probabilities)
        values = [float(s.rstrip("%")) for s in shown]
        if all(values[i] != values[j] for i in range(len(values)) for j in range(i)
               if probabilities[i] != probabilities[j]):
            break
    return shown
