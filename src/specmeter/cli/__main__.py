"""`python -m specmeter.cli`: the same command line as the `specmeter` script."""

from specmeter.cli.app import main

main()
