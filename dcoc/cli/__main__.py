"""``python -m dcoc.cli``: the dcoc command."""
import sys

try:
    from dcoc.cli import main
except KeyboardInterrupt:  # Ctrl-C before main() runs: one line, exit 130
    sys.stderr.write("dcoc: interrupted\n")
    sys.exit(130)

sys.exit(main())
