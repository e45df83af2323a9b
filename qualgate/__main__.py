"""``python -m qualgate``: the same as the ``qualgate`` command."""

from .cli import main

main()
