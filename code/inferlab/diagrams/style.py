"""The look the decoding, KV-cache and speculative diagrams share: colours, fonts, boxes and arrows.

Diagrams are read on phones as often as on screens, so the text is large (13 pt at about 5 inches
wide, which a 390 px screen shows near its natural size), the words are few, and every colour
comes with a second cue (a label, a hatch or a line style). The colours are Okabe and Ito's
palette, which readers with the common colour-vision deficiencies can still tell apart.
"""

from __future__ import annotations

import textwrap

BLUE = "#0072B2"  # reused / cached / the most probable sequence
ORANGE = "#D55E00"  # new / greedy / rejected
GREEN = "#009E73"  # accepted
YELLOW = "#E69F00"  # drawn from the residual, or the bonus token
PURPLE = "#CC79A7"
INK = "#111111"  # text and outlines
GREY = "#6B6B6B"  # secondary lines (on white: 5.3:1 contrast)
PALE = "#D9D9D9"  # masked / not read
BLUE_FILL = "#CFE3F3"
ORANGE_FILL = "#F7D7C4"
GREEN_FILL = "#CCEDE3"
YELLOW_FILL = "#FBE8C2"

FONT = 13  # points: body text of a diagram
SMALL = 12  # points: the smallest text any diagram shows
CODE = "monospace"  # tokens and identifiers: data, shown the same in both languages


def new_figure(width: float, height: float, xlim: tuple[float, float], ylim: tuple[float, float]):
    """Return (figure, axes) of a white drawing area with no axes, in data units given by xlim/ylim."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(width, height), facecolor="white")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.axis("off")
    return fig, ax


def wrap(text: str, width: int) -> str:
    """Return English text broken into lines of at most ``width`` characters (zh-TW wraps by its own entry)."""
    return "\n".join(textwrap.wrap(text, width))


def box(ax, x: float, y: float, w: float, h: float, face: str, edge: str = INK, **kwargs):
    """Draw a rounded box with its lower-left corner at (x, y); return the patch."""
    from matplotlib.patches import FancyBboxPatch

    patch = FancyBboxPatch(
        (x, y), w, h, boxstyle="round,pad=0,rounding_size=0.08", facecolor=face, edgecolor=edge, linewidth=1.5, **kwargs
    )
    ax.add_patch(patch)
    return patch


def arrow(ax, start: tuple[float, float], end: tuple[float, float], color: str = INK, width: float = 1.5, **kwargs):
    """Draw an arrow from ``start`` to ``end``; return it."""
    from matplotlib.patches import FancyArrowPatch

    patch = FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, color=color, linewidth=width, **kwargs)
    ax.add_patch(patch)
    return patch
