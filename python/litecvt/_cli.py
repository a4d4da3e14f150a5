"""The `litecvt` console script: the same command line as the Rust binary."""

import sys

from . import _litecvt


def main() -> None:
    """Runs `litecvt` with `sys.argv` and exits with its status."""
    sys.exit(_litecvt.main(["litecvt", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
