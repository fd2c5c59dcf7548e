"""`python -m seqmix verify ...`: the certificates of seqmix.verify for registered mixers (`seqmix verify` runs
this; docs/verify.md)."""
import sys

from .verify import main

if len(sys.argv) < 2 or sys.argv[1] != "verify":
    print("usage: python -m seqmix verify [--mixer SPEC ...] [--json] (see --help)", file=sys.stderr)
    sys.exit(2)
sys.exit(main(sys.argv[2:]))
