"""What the ``xsm_*`` management commands share: the base class, argument
types and the translation of library errors into ``CommandError``.

The work itself lives in :mod:`django_xsm.operations`; a command parses,
calls one function there and prints the result.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter

from django_xsm import conf
from django_xsm.exceptions import StoreUnavailableError, XsmError

from .durations import MAX_DURATION, parse_duration

__all__ = [
    "XsmCommand",
    "command_errors",
    "duration_type",
    "int_type",
    "settings_problems",
    "summary",
]


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's option order, with the description (and its examples)
    printed as written."""


def duration_type(
    option: str, *, allow_ms: bool = False, maximum: _dt.timedelta = MAX_DURATION
) -> Callable[[str], _dt.timedelta]:
    """An argparse ``type`` parsing ``30d``/``12h``/``15m``/``90s``."""

    def parse(text: str) -> _dt.timedelta:
        try:
            return parse_duration(text, name=option, allow_ms=allow_ms, maximum=maximum)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def int_type(option: str, *, minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number in ``[minimum, maximum]``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"Invalid {option} {text!r}: give a whole number from {minimum} to {maximum}"
            ) from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"Invalid {option} {value}: give a whole number from {minimum} to {maximum}"
            )
        return value

    return parse


def summary(result: Any) -> str:
    """``name=value`` for each of ``result.as_dict()`` (stable, for log parsing)."""
    return " ".join(f"{name}={value}" for name, value in result.as_dict().items())


def settings_problems(problems: Sequence[str]) -> str:
    """The message of a command refused by invalid ``XSM`` settings: every
    problem on its own line, with the id ``manage.py check`` gives it."""
    lines = "".join(f"\n  (xsm.E001) {problem}" for problem in problems)
    return (
        f"XSM is invalid ({len(problems)} problem(s); see docs/settings.md and "
        f"`manage.py check`):{lines}"
    )


@contextlib.contextmanager
def command_errors() -> Iterator[None]:
    """Turn what the library raises on purpose into ``CommandError`` (a
    message on stderr and a non-zero exit, no traceback)."""
    try:
        yield
    except conf.InvalidSettings as exc:
        raise CommandError(settings_problems(exc.problems)) from exc
    except StoreUnavailableError as exc:
        raise CommandError(
            f"{exc.message}; check that the server is up and that XSM['REDIS_URL'] "
            "(or CACHE_ALIAS) points at it"
        ) from exc
    except (XsmError, ImproperlyConfigured) as exc:
        raise CommandError(str(exc)) from exc


class XsmCommand(BaseCommand):
    """Base of the ``xsm_*`` commands: help printed as written (examples
    included) and :meth:`say` for verbosity-gated output."""

    verbosity = 1
    #: The counter of a daemon's pass result that says the pass did work.
    work_counter = ""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def execute(self, *args: Any, **options: Any) -> Any:
        self.verbosity = int(options.get("verbosity", 1))
        if options.get("skip_checks"):
            # Without the system checks (call_command(), --skip-checks) the
            # settings are still validated before any work: every problem at
            # once, as a CommandError (exit 1, no traceback). With the checks,
            # Django has already refused them as xsm.E001.
            with command_errors():
                conf.get_settings()
        return super().execute(*args, **options)

    def add_interval(self, parser: Any, help: str) -> None:
        """The daemon's ``--interval`` (default 1s, at most 1h, ms allowed)."""
        parser.add_argument(
            "--interval",
            type=duration_type("--interval", allow_ms=True, maximum=_dt.timedelta(hours=1)),
            default=_dt.timedelta(seconds=1),
            metavar="DURATION",
            help=help,
        )

    def passed(self, result: Any, message: str | None) -> None:
        """Report one pass of a daemon: the store error's ``message`` on
        stderr, else the summary when the pass did work (its
        :attr:`work_counter` is not 0) or the verbosity is 2."""
        if message is not None:
            self.stderr.write(f"{message}; retrying")
        elif getattr(result, self.work_counter) or self.verbosity >= 2:
            self.say(summary(result))

    def say(self, text: str, level: int = 1, style: Callable[[str], str] | None = None) -> None:
        """Write ``text`` to stdout when the verbosity is at least ``level``."""
        if self.verbosity >= level:
            self.stdout.write(style(text) if style else text)
