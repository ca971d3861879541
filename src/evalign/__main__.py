"""``python -m evalign``."""

from evalign.cli import main

main()
