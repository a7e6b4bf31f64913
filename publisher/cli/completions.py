"""`publisher completions bash|zsh|fish`: the shell's completion script for
publisher, made by click's own completion mechanism (the script asks
`publisher` itself what to complete, through $_PUBLISHER_COMPLETE)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from publisher.errors import EXIT_OK

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_PUBLISHER_COMPLETE"  # click's name for it: _<PROG>_COMPLETE


@click.command("completions")
@click.argument("shell", type=click.Choice(SHELLS))
def command(shell: str) -> int:
    """Print the completion script for SHELL. To load it in every new shell:

    \b
      bash: eval "$(publisher completions bash)"   in ~/.bashrc
      zsh:  eval "$(publisher completions zsh)"    in ~/.zshrc
      fish: publisher completions fish | source    in ~/.config/fish/config.fish
    """
    from publisher.cli import cli  # the root group: every command it lazily holds is completed

    script = get_completion_class(shell)(cli, {}, "publisher", COMPLETE_VAR).source()
    click.echo(script, nl=not script.endswith("\n"))
    return EXIT_OK
