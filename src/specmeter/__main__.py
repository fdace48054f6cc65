"""`python -m specmeter`: the command line."""

from specmeter.cli import main

main()
