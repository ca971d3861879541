"""``python -m evalign.cli``."""

from evalign.cli import main

main()
