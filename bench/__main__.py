"""`python -m bench`: what `make bench` runs (bench/production.py)."""

from bench.production import main

main()
