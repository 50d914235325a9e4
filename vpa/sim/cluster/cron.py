"""Cron schedules as the CronJob controller reads them (robfig/cron `ParseStandard`), evaluated in UTC.

Owns: parsing five-field expressions (`*`, `?`, `*/n`, `a-b`, `a-b/n`, lists, month and weekday names, 7 as
Sunday) and the descriptors `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly` and
`@every <duration>`; computing the next activation strictly after a Unix time. Day-of-month and day-of-week
combine with OR when both are restricted and with AND when either is `*`/`?`, as cron (and robfig) do.

Must not: read the clock or know about Jobs.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Final

_MONTHS: Final = {
    name: i
    for i, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1
    )
}
_DAYS: Final = {name: i for i, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_DESCRIPTORS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION_RE: Final = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")


class CronError(ValueError):
    """An expression the CronJob controller would reject (the message quotes the field)."""


@dataclass(frozen=True, slots=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_star: bool
    dow_star: bool
    every_s: float | None = None

    def next_after(self, t: float) -> float:
        """The first activation strictly after Unix time `t` (UTC)."""
        if self.every_s is not None:
            # robfig ConstantDelaySchedule: next = t + delay rounded down to the second.
            return float(int(t) + int(self.every_s))
        start = dt.datetime.fromtimestamp(int(t) // 60 * 60 + 60, tz=dt.UTC)
        day = start.date()
        for _ in range(366 * 5):
            if day.month in self.months and self._day_matches(day):
                first_hour = start.hour if day == start.date() else 0
                for hour in sorted(h for h in self.hours if h >= first_hour):
                    first_minute = start.minute if (day == start.date() and hour == start.hour) else 0
                    for minute in sorted(m for m in self.minutes if m >= first_minute):
                        return dt.datetime(
                            day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC
                        ).timestamp()
            day = day + dt.timedelta(days=1)
        raise CronError("schedule never fires within five years")

    def _day_matches(self, day: dt.date) -> bool:
        dom_ok = day.day in self.days
        dow_ok = (day.weekday() + 1) % 7 in self.weekdays
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok


def _parse_field(text: str, low: int, high: int, names: dict[str, int] | None, what: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(f"empty value in {what} field {text!r}")
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"invalid step in {what} field {text!r}")
            step = int(step_text)
        if part in ("*", "?"):
            lo, hi = low, high
        elif "-" in part:
            a, b = part.split("-", 1)
            lo, hi = _value(a, names, what, text), _value(b, names, what, text)
        else:
            lo = _value(part, names, what, text)
            hi = high if step > 1 else lo
        if lo < low or hi > high or lo > hi:
            raise CronError(f"{what} field {text!r} out of range [{low}, {high}]")
        values.update(range(lo, hi + 1, step))
    return frozenset(values)


def _value(token: str, names: dict[str, int] | None, what: str, text: str) -> int:
    if names is not None and token.lower() in names:
        return names[token.lower()]
    if not token.isdigit():
        raise CronError(f"failed to parse int from {token!r} in {what} field {text!r}")
    return int(token)


def _parse_duration(text: str) -> float:
    pos, total = 0, 0.0
    for match in _DURATION_RE.finditer(text):
        if match.start() != pos:
            break
        pos = match.end()
        number, unit = float(match.group(1)), match.group(2)
        total += number * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[unit]
    if pos != len(text) or not text:
        raise CronError(f"failed to parse duration @every {text}")
    return total


def parse(expression: str) -> Schedule:
    """Parse a CronJob `spec.schedule`; raises CronError."""
    text = expression.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise CronError("CRON_TZ or TZ used in schedule is not supported; use spec.timeZone")
    if text.startswith("@every "):
        seconds = _parse_duration(text[len("@every ") :].strip())
        if seconds < 1:
            seconds = 1.0
        everything: frozenset[int] = frozenset()
        return Schedule(
            everything, everything, everything, everything, everything, True, True, every_s=seconds
        )
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    fields = text.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: {expression!r}")
    minute, hour, dom, month, dow = fields
    weekdays = _parse_field(dow, 0, 7, _DAYS, "day-of-week")
    if 7 in weekdays:
        weekdays = (weekdays - {7}) | {0}
    return Schedule(
        minutes=_parse_field(minute, 0, 59, None, "minute"),
        hours=_parse_field(hour, 0, 23, None, "hour"),
        days=_parse_field(dom, 1, 31, None, "day-of-month"),
        months=_parse_field(month, 1, 12, _MONTHS, "month"),
        weekdays=weekdays,
        dom_star=dom.startswith(("*", "?")),
        dow_star=dow.startswith(("*", "?")),
    )
