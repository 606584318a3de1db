"""An image preprocessing script whose `--recenter` flag is `type=bool, default=True`, and
which adds `--dont_recenter` to store False into the same attribute.

`--recenter False` still leaves it on, but the command line can turn it off with
`--dont_recenter`: the flag works, only its spelling misleads.
"""

import argparse


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", type=str)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--recenter", type=bool, default=True)  # expect: TD913
    parser.add_argument("--dont_recenter", dest="recenter", action="store_false")
    opt = parser.parse_args()
    print(opt.path, opt.size, "recentered" if opt.recenter else "as is")


if __name__ == "__main__":
    main()
