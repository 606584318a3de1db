"""``python -m torchdoctor.cli``."""

from torchdoctor.cli import main

main()
