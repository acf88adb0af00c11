"""``python -m dcoc.cli``: the dcoc command."""
import sys

try:
    from dcoc.cli import main
except BaseException as exc:  # Ctrl-C before main() runs: one line, exit 130
    chain, seen = exc, set()
    while chain is not None and id(chain) not in seen:  # also when wrapped (__set_name__)
        if isinstance(chain, KeyboardInterrupt):
            sys.stderr.write("dcoc: interrupted\n")
            sys.exit(130)
        seen.add(id(chain))
        chain = chain.__cause__ or chain.__context__
    raise

sys.exit(main())
