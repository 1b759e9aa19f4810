"""`python -m rollout_lineage.cli` and the `lineage` console script: Ctrl-C while click and the
command table load (start-up) is exit 130 with one line too, as it is once a command runs
(`main.main`); a command's own modules load with the signal held (`adapters/interrupts.py`)."""

import sys


def main() -> None:
    try:
        from .main import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run()


if __name__ == "__main__":
    main()
