"""Range checks of numeric options, phrased as the flag to fix (one line each)."""
from typing import Optional

from core.errors import UsageError


def check_at_least(minimum: float, unset: Optional[str] = None, **values) -> None:
    """UsageError for the first --flag=value below minimum. None is an unset flag: allowed
    when `unset` names what that means (e.g. 'AUTOTUNE'). 0 never means 'the default'."""
    for flag, value in values.items():
        if value is None and unset is not None:
            continue
        if value is None or value < minimum:
            hint = f', or leave it unset for {unset}' if unset else ''
            raise UsageError(f'--{flag}={value} is out of range; pass at least {minimum:g}'
                             f'{hint}.')


def check_fraction(low_open: bool = False, high_open: bool = False, **values) -> None:
    """UsageError for the first --flag=value outside [0, 1] (ends open as asked)."""
    for flag, value in values.items():
        if value is None:
            continue
        too_low = value <= 0 if low_open else value < 0
        too_high = value >= 1 if high_open else value > 1
        if too_low or too_high:
            interval = f'{"(" if low_open else "["}0, 1{")" if high_open else "]"}'
            raise UsageError(f'--{flag}={value:g} is out of range; pass a value in '
                             f'{interval}.')
