"""Draw the concept diagrams into docs/figures/ (English and zh-TW) and write the worked examples.

    python -m inferlab.diagrams              every topic
    python -m inferlab.diagrams flash paged  some topics

Nothing is measured: a diagram or a worked example is computed by the package's own functions, so
running this again gives the same pictures and numbers on any machine.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MPLBACKEND", "Agg")

from inferlab import diagrams  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topics", nargs="*", help=f"some of {', '.join(diagrams.TOPICS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [topic for topic in args.topics if topic not in diagrams.TOPICS]
    if unknown:
        parser.error(f"unknown topics {unknown}; choose from {', '.join(diagrams.TOPICS)}")
    root = diagrams.FIGURES.parent.parent
    for topic in args.topics or diagrams.TOPICS:
        for name in diagrams.diagrams(topic):
            for path in diagrams.draw(topic, name):
                print(f"drew {path.relative_to(root)}")
        for name in diagrams.worked_examples(topic):
            print(f"wrote {diagrams.write_worked(topic, name)}")


if __name__ == "__main__":
    main()
