"""A click group whose commands' modules are imported only when a command is used.

``tf analyze`` should not pay for importing what only other commands run: ``tf diff``'s
comparison and report renderers, ``tf record``'s recorder, ``tf monitor``'s log readers. Each
command is registered by name as ``"module:attribute"`` and its module imported the first time
the command is looked up (``get_command``), so a run imports the one command it runs.

Listing the commands (``tf --help``) and a mistyped name (click's "Did you mean ...?") import
them all: the help text and the suggestions then come from the commands themselves, exactly as
with commands added up front, and no short help is written twice.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    """A ``click.Group`` with ``lazy_commands``: command name -> ``"module:attribute"``."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.add_command(self._load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # an unknown name: click suggests close ones from the commands already added
        if args and args[0] not in self.commands and args[0] not in self.lazy_commands:
            for name in self.lazy_commands:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def _load(self, name: str) -> click.Command:
        module, _, attribute = self.lazy_commands[name].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):  # a wrong entry is a bug, not bad input
            raise TypeError(f"{self.lazy_commands[name]} is not a click command")
        return command
