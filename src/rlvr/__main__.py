"""``python -m rlvr`` is the ``rlvr`` command."""

from rlvr.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
