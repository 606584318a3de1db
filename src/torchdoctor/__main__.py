"""``python -m torchdoctor``: the command line, for environments without the script on
PATH (a notebook's kernel, a cluster module, ``python3.11 -m``)."""

from torchdoctor.cli import main

main(prog_name="torchdoctor")
