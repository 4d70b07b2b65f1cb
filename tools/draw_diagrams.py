"""Draw the concept diagrams (inferlab.diagrams) into docs/figures/, in English and zh-TW, and write
the worked examples' result files: the same as ``python -m inferlab.diagrams``.

    python tools/draw_diagrams.py              every topic
    python tools/draw_diagrams.py flash paged  some topics

Nothing is measured: a diagram is drawn from the package's own functions, so redrawing it gives
the same picture on any machine.
"""

from __future__ import annotations

from inferlab.diagrams.__main__ import main

if __name__ == "__main__":
    main()
