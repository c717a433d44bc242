"""``python -m skillbase``: the same as the ``skillbase`` command."""

from skillbase.console import main

if __name__ == "__main__":
    main()
