"""``python -m dcoc.cli``: the dcoc command."""
import sys

from dcoc.cli import main

sys.exit(main())
