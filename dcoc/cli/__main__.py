"""``python -m dcoc.cli``: the dcoc command."""
import sys

try:
    from dcoc.cli import main
except BaseException as exc:  # Ctrl-C before main() runs: one line, exit 130
    from dcoc.errors import caused_by_ctrl_c

    if not caused_by_ctrl_c(exc):
        raise
    sys.stderr.write("dcoc: interrupted\n")
    sys.exit(130)

sys.exit(main())
