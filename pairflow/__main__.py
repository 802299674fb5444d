"""``python -m pairflow ...`` = the ``pairflow`` command."""
from pairflow.apps.cli import console

if __name__ == "__main__":
    console()
