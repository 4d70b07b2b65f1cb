"""Draw the concept diagrams (inferlab.diagrams) into docs/figures/, in English and zh-TW.

    python tools/draw_diagrams.py              every topic
    python tools/draw_diagrams.py flash paged  some topics

Nothing is measured: a diagram is drawn from the package's own functions, so redrawing it gives
the same picture on any machine.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MPLBACKEND", "Agg")

from inferlab import diagrams  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topics", nargs="*", help=f"some of {', '.join(diagrams.TOPICS)} (default: all)")
    args = parser.parse_args()
    unknown = [topic for topic in args.topics if topic not in diagrams.TOPICS]
    if unknown:
        parser.error(f"unknown topics {unknown}; choose from {', '.join(diagrams.TOPICS)}")
    for topic in args.topics or diagrams.TOPICS:
        for name in diagrams.diagrams(topic):
            for path in diagrams.draw(topic, name):
                print(f"drew {path.relative_to(diagrams.FIGURES.parent.parent)}")


if __name__ == "__main__":
    main()
