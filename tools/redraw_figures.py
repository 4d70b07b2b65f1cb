"""Redraw the guides' figures from their committed result files, in English and in zh-TW.

    python tools/redraw_figures.py [decoding kvcache speculative flash paged models] [--only-language zh-TW]

Each topic's bench draws its figures right after measuring; this draws them again from the result
files alone (nothing is measured or recomputed, and no result file is written), through each
bench's own plotting functions and ``inferlab.bench.figures.save_figure``, which writes
``name.png`` and ``name.zh-TW.png``. ``--only-language zh-TW`` keeps the English files as they are.
The models figures come from the bundled pair's committed training logs (``training_log.jsonl``,
``distill_log.jsonl``), drawn by ``inferlab.models.evaluate``'s own functions.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from inferlab.bench import read_result

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"


def redraw_decoding() -> None:
    from inferlab.decoding import bench

    dp = read_result("decoding_dp_vs_bruteforce")["values"]
    bench.plot_dp(dp["rows"], dp["vocab"], dp["order"])
    shapes = read_result("decoding_sampling_shapes")["values"]
    for name in ("temperature", "top_k", "top_p"):
        bench.plot_shapes(name, shapes[name], shapes["shown_tokens"])
    bench.plot_repetition(read_result("decoding_repetition")["values"]["rows"])


def redraw_kvcache() -> None:
    from inferlab.kvcache import bench

    bench.draw_figures(FIGURES / "kvcache")


def redraw_speculative() -> None:
    from inferlab.speculative import bench

    folder = FIGURES / "speculative"
    bench.plot_exactness(read_result("speculative_exactness")["values"], folder / "exactness.png")
    sweep = read_result("speculative_gamma_sweep")["values"]
    for regime in bench.REGIMES:
        bench.plot_regime(sweep[regime], folder / f"gamma_sweep_{regime}.png")
    bench.plot_tree(read_result("speculative_tree")["values"], folder / "tree.png")


def redraw_flash() -> None:
    from inferlab.flash import bench

    traffic = read_result("flash_traffic")["values"]
    bench.plot_traffic(traffic)
    bench.plot_roofline(traffic)
    bench.plot_tiles()
    bench.plot_online_softmax()
    bench.plot_memory(read_result("flash_memory_cpu")["values"])
    gpu = read_result("flash_gpu")["values"]
    if gpu.get("measured"):
        bench.plot_gpu(gpu)


def redraw_paged() -> None:
    from inferlab.paged import bench

    for plot in (
        bench.plot_fragmentation,
        bench.plot_offload,
        bench.plot_invalidation,
        bench.plot_multiturn,
        bench.plot_throughput,
    ):
        plot()


def redraw_models() -> None:
    from inferlab.models import BUNDLED_DIR, evaluate

    folder = FIGURES / "models"
    evaluate.plot_training_curve(BUNDLED_DIR / "training_log.jsonl", folder / "training_curve.png")
    evaluate.plot_distillation_curve(BUNDLED_DIR / "distill_log.jsonl", folder / "distill_curve.png")


TOPICS: dict[str, Callable[[], None]] = {
    "decoding": redraw_decoding,
    "kvcache": redraw_kvcache,
    "speculative": redraw_speculative,
    "flash": redraw_flash,
    "paged": redraw_paged,
    "models": redraw_models,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topics", nargs="*", help=f"some of {', '.join(TOPICS)} (default: all)")
    parser.add_argument("--only-language", choices=["zh-TW"], help="keep the English figures as they are")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.topics) - set(TOPICS))
    if unknown:
        parser.error(f"topics must be among {', '.join(TOPICS)}, got {unknown}")
    for topic in args.topics or list(TOPICS):
        folder = FIGURES / topic
        english = sorted(p for p in folder.glob("*.png") if not p.name.endswith(".zh-TW.png"))
        with tempfile.TemporaryDirectory() as kept:
            if args.only_language:
                for path in english:
                    shutil.copy2(path, Path(kept) / path.name)
            TOPICS[topic]()
            if args.only_language:
                for path in english:
                    shutil.copy2(Path(kept) / path.name, path)
        drawn = sorted(p.relative_to(ROOT) for p in folder.glob("*.zh-TW.png"))
        print(f"{topic}: {len(drawn)} zh-TW figures: {', '.join(p.name for p in drawn)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
