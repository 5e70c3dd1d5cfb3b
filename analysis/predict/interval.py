"""How far a prediction can be trusted, printed with it: an interval from the calibration's spread and the held-out
error that docs/predict.md reports, and figures rounded to what that interval supports (no seven significant
digits of a number known to a few percent)."""

from __future__ import annotations

import math

from analysis.predict.model import Parts

# docs/predict.md, "CPU: the whole held-out set in one command": the mean |error| of the 30 held-out runs (22 of
# 30 within 10%). A mean, not a bound: a quarter of the held-out runs fell outside 10%. No held-out GPU point yet.
HELDOUT_ERROR_PCT = 6.9
HELDOUT_WITHIN_10 = "22 of 30"


def relative_halfwidth(parts: Parts) -> float:
    """The interval's half-width as a fraction of the prediction: the held-out error and the calibration's
    relative standard error (Parts.relative_error), independent, added in quadrature."""
    return math.hypot(HELDOUT_ERROR_PCT / 100, parts.relative_error())


def decimals_for(halfwidth: float) -> int:
    """The decimal place two significant digits of the half-width reach (negative: tens, hundreds, ...)."""
    if not halfwidth > 0 or not math.isfinite(halfwidth):
        return 0
    return 1 - math.floor(math.log10(halfwidth))


def rounded(value: float, halfwidth: float) -> str:
    """value with thousands separators, rounded to two significant digits of its half-width: 4,142,014 with
    +-290,000 reads 4,140,000."""
    places = decimals_for(halfwidth)
    return f"{round(value, places):,.{max(places, 0)}f}"


def note(parts: Parts, halfwidth: float) -> str:
    """The line under the table that says what +- is."""
    calibration = parts.relative_error()
    said = f"the calibration's spread {100 * calibration:.1f}% (jitter / sqrt({parts.num_steps} steps))"
    return (
        f"+- {100 * halfwidth:.1f}%: the held-out mean |error| {HELDOUT_ERROR_PCT}% ({HELDOUT_WITHIN_10} held-out "
        f"CPU runs within 10%, docs/predict.md) and {said}, in quadrature; a typical error, not a bound"
    )
