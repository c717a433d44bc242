"""``python -m skillbase.mcp_server``: the same as ``skillbase serve`` (stdio unless told otherwise)."""

from skillbase.console import main

if __name__ == "__main__":
    main(["serve", *__import__("sys").argv[1:]])
