"""Benchmark: sequential against exact head sweeps on the SST-2 fixture, at growing data sizes, CPU.

Sizes: 872 = SST-2 dev; larger sizes add sentences sampled from SST-2 train by seed, each size a prefix of
the largest (that the fixture saw them in training does not matter for cost). The exact mode's work, one
full pass per unit (72 single heads + 6 layers = 78 units), is computed once at the largest size: the
plain model's and every unit's per-example correctness and the plain pass's margins, timed (that is the
exact mode's wall time at that size) and cached in benchmarks/.cache as .npz (no pickles). The exact classes at each size come from those
outcomes, with the probe's own bootstrap seeds. The sequential rule is then replayed on the same outcomes
(its passes and classes follow from them), and ``--timed`` also runs the probe's sequential sweep for real
at each size, to time it and check that it uses the replayed passes; ``--timed-exact`` also times the probe's
exact mode at the sizes named, in the same run, and prints the ratio.

Prints the ablations' full-pass equivalents, sequential against exact, with their ratio, and checks the
issue's targets: at 3,000 at most a third of the exact passes, at 8,000 at most a fifth, at 872 no more than
the exact passes plus 5%; every unit classified as in the exact mode (within, drop or gain against the
tolerance) unless its exact interval straddles it. The pruning curve is left out (``pruning: false``). Also
prints the replayed passes with the stricter ``interim_share: 0.2``, with other census shares and without the
census (with the share of changed predictions the census held), and, without the census, a reference for what
any betting confidence sequence could save: the passes if each unit stopped at the first look where the best
constant bet chosen in hindsight would have decided it, at the probe's looks and with a look every 32 examples.

Usage: python benchmarks/heads_sequential.py [--sizes 872,3000,8000] [--tolerance 0.01] [--timed]
       [--timed-exact 3000]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from common import REPO, SHARED, SST2_DEV, SST2_MODEL, require, sst2_target

from bertprobe.data import Dataset, DataSpec, align_labels, load_table
from bertprobe.params import parse_params
from bertprobe.probe import ProbeContext
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.probe import HeadPruningProbe
from bertprobe.probes.head_pruning.sweep import HeadSweep
from bertprobe.probes.head_pruning.sequential import census_first, classify, looks, run_sequential
from bertprobe.stats import bootstrap_ci

TRAIN = SHARED / "data" / "sst2" / "train.tsv"
TARGETS = {3000: 1 / 3, 8000: 1 / 5}
SEED = 13


def data_of(size: int, target) -> Dataset:
    """SST-2 dev, then train sentences sampled by seed: each size is a prefix of the largest one asked."""
    dev = load_table(DataSpec(path=str(SST2_DEV), text="sentence"))
    examples = list(dev.examples)
    if size > len(examples):
        train = load_table(DataSpec(path=str(TRAIN), text="sentence")).examples
        seen = {ex.text for ex in examples}
        pool = [ex for ex in train if ex.text not in seen and len(ex.text.split()) >= 4]
        random.Random(SEED).shuffle(pool)
        examples += pool[: size - len(examples)]
    examples = [type(ex)(ex.text, label=ex.label, id=f"x{i}") for i, ex in enumerate(examples[:size])]
    return align_labels(Dataset(examples, name=f"sst2-{size}", label_names=dev.label_names), target.label_names)


def units_of(layers: int, heads: int) -> list[tuple[str, tuple[str, list[tuple[int, int]]], int]]:
    """The probe's units with its bootstrap seeds: each head alone, then each layer's heads together."""
    out = [(f"L{layer}H{head}", ("mask", [(layer, head)]), layer * heads + head)
           for layer in range(layers) for head in range(heads)]
    return out + [(f"layer{layer}", ("mask", [(layer, h) for h in range(heads)]), 10_000 + layer)
                  for layer in range(layers)]


def exact_outcomes(size: int, target) -> tuple[np.ndarray, dict[str, np.ndarray], float, np.ndarray]:
    """The plain model's and every unit's per-example correctness at ``size`` (cached), the seconds the exact
    mode took to compute them (one full pass per unit, the plain pass included), and the plain pass's margins
    (the census's order; added to an older cache by one plain pass)."""
    cache = REPO / "benchmarks" / ".cache" / f"heads-outcomes-{size}.npz"
    if cache.is_file():
        with np.load(cache, allow_pickle=False) as z:
            stored = {k: z[k] for k in z.files}
        if "margins" not in stored:
            ev = HeadSweep().evaluator(target, data_of(size, target))
            if not np.array_equal(ev.correct().astype(bool), stored["base"]):
                raise SystemExit(f"{cache} does not match this model's plain pass: delete it and run again")
            stored["margins"] = ev.margins
            np.savez(cache, **stored)
        return (stored["base"], {k[2:]: v for k, v in stored.items() if k.startswith("u:")}, float(stored["seconds"]),
                stored["margins"])
    data = data_of(size, target)
    sweep = HeadSweep()
    start = time.perf_counter()
    ev = sweep.evaluator(target, data)
    base = ev.correct().astype(bool)
    layers, heads = ev.shape
    units = units_of(layers, heads)
    out: dict[str, np.ndarray] = {}
    for i in range(0, len(units), 24):
        chunk = units[i:i + 24]
        for (key, _, _), values in zip(chunk, sweep.run(ev, [u for _, u, _ in chunk])):
            out[key] = np.asarray(values, dtype=bool)
        print(f"  exact outcomes at {size}: {min(i + 24, len(units))}/{len(units)} units, "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    seconds = time.perf_counter() - start
    cache.parent.mkdir(exist_ok=True)
    np.savez(cache, base=base, seconds=np.float64(seconds), margins=ev.margins, **{f"u:{k}": v for k, v in out.items()})
    return base, out, seconds, ev.margins


def exact_classes(base: np.ndarray, outcomes: dict[str, np.ndarray], seeds: dict[str, int], n: int,
                  tolerance: float) -> dict[str, str]:
    """Each unit's class in the exact mode on the first ``n`` examples (the probe's bootstrap and seeds)."""
    out = {}
    for key, changed in outcomes.items():
        diff = changed[:n].astype(np.float64) - base[:n].astype(np.float64)
        out[key] = classify(bootstrap_ci(diff, 1000, 0.95, seeds[key]), tolerance)
    return out


def replay(base: np.ndarray, outcomes: dict[str, np.ndarray], seeds: dict[str, int], n: int,
           params: HeadParams, margins: np.ndarray):
    """The sequential rule on the recorded outcomes of the first ``n`` examples, in the probe's order (its
    census of the smallest margins first)."""
    order, census = census_first(np.random.default_rng(SEED).permutation(n), margins[:n], params.census_share)
    keys = list(outcomes)

    def evaluate(open_units, a, b):
        return [outcomes[key][:n][order[a:b]] for key, _ in open_units]

    return run_sequential([(k, k) for k in keys], base[:n], order, evaluate, params.tolerance, params.confidence,
                          params.interim_share, params.bootstrap, SEED, params.sequential_block, seeds=seeds,
                          growth=params.sequential_growth, census=census)


def hindsight_passes(base: np.ndarray, outcomes: dict[str, np.ndarray], n: int, tolerance: float,
                     alpha: float, first: int, growth: float) -> float:
    """A reference for any betting confidence sequence: the passes used if each unit stopped at the first look
    where the best *constant* bet chosen in hindsight (knowing that look's outcomes) reaches ``1 / alpha`` on
    every side its class needs (not valid: an adaptive bet only tracks it from below on exchangeable data)."""
    order = np.random.default_rng(SEED).permutation(n)
    marks = looks(n, first, growth)
    shares = np.linspace(0.0, 0.999, 400)
    threshold = np.log(1 / alpha)

    def rejects(up: int, down: int, same: int, m: float, side: int) -> bool:
        stake = shares / (1 + m) if side > 0 else shares / (1 - m)  # the largest stake that cannot go bust
        gains = sum(count * np.log1p(side * stake * (x - m)) for x, count in ((1, up), (-1, down), (0, same))
                    if count)
        return bool(np.max(gains) >= threshold)

    used = 0
    for changed in outcomes.values():
        diff = (changed[:n].astype(np.int8) - base[:n].astype(np.int8))[order]
        ups, downs = np.cumsum(diff == 1), np.cumsum(diff == -1)
        for end in marks:
            up, down = int(ups[end - 1]), int(downs[end - 1])
            same = end - up - down
            within = rejects(up, down, same, -tolerance, 1) and rejects(up, down, same, tolerance, -1)
            drop, gain = rejects(up, down, same, -tolerance, -1), rejects(up, down, same, tolerance, 1)
            if end == n or within or drop or gain:
                used += end
                break
    return used / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="872,3000,8000")
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--timed", action="store_true", help="also run the probe's sequential sweep at each size")
    parser.add_argument("--timed-exact", default="", type=lambda v: {int(x) for x in v.split(",") if x},
                        help="sizes at which to time the probe both ways in this run, sequential and exact "
                             "(e.g. 3000)")
    args = parser.parse_args()
    print_table([int(s) for s in args.sizes.split(",")], args.tolerance, args.timed, args.timed_exact)


def cached(size: int) -> bool:
    """Whether the exact outcomes at ``size`` are cached (the table then replays in about a minute)."""
    return (REPO / "benchmarks" / ".cache" / f"heads-outcomes-{size}.npz").is_file()


def print_table(sizes: list[int], tolerance: float = 0.01, timed: bool = False,
                timed_exact: set[int] | frozenset[int] = frozenset()) -> None:
    """The table of the module docstring (also printed by ``base_size.py``)."""
    require(SST2_MODEL, SST2_DEV, TRAIN)
    target = sst2_target()
    base, outcomes, seconds, margins = exact_outcomes(max(sizes), target)
    layers = 1 + max(int(k[5:]) for k in outcomes if k.startswith("layer"))
    heads = sum(k.startswith("L0H") for k in outcomes)
    seeds = {key: seed for key, _, seed in units_of(layers, heads)}
    def params_with(**extra: object) -> HeadParams:
        """The probe's params as the table runs them (no pruning curve, this tolerance), with ``extra``."""
        return parse_params(HeadParams, {"pruning": False, "tolerance": tolerance, **extra}, "p")

    def disagreements(exact: dict[str, str], result) -> list[str]:
        """Units whose exact class (not straddling) the sequential ``result`` reads differently."""
        got = {s.key: s.settled for s in result.units}
        return [f"{k}: {c} vs {got[k]}" for k, c in exact.items() if c != "straddles" and c != got[k]]

    params = params_with()
    print(f"exact mode at {max(sizes)} examples: {len(outcomes)} units + the plain pass in {seconds:.1f} s")
    print(f"{'examples':>8}  {'exact passes':>12}  {'seq passes':>10}  {'ratio':>6}  {'target':>11}  "
          f"{'seq s':>6}  disagreements (exact interval not straddling)")
    for size in sizes:
        exact = exact_classes(base, outcomes, seeds, size, tolerance)
        seq = replay(base, outcomes, seeds, size, params, margins)
        disagree = disagreements(exact, seq)
        full = float(len(outcomes))
        ratio = seq.passes / full
        bound = TARGETS.get(size, 1.05)
        timing = "-"
        if timed or size in timed_exact:
            start = time.perf_counter()
            run = HeadPruningProbe().run(target, data_of(size, target), params, ProbeContext(seed=SEED))
            timing = f"{time.perf_counter() - start:.0f}"
            if abs(run.value("ablation_passes") - seq.passes) > 0.05:
                timing += f" (the probe used {run.value('ablation_passes'):.1f} passes)"
        if size in timed_exact:  # the baseline in the same run: the probe in its exact mode
            start = time.perf_counter()
            HeadPruningProbe().run(target, data_of(size, target), params_with(sequential=False), ProbeContext(seed=SEED))
            exact_seconds = time.perf_counter() - start
            timing += f" of {exact_seconds:.0f} exact ({float(timing.split()[0]) / exact_seconds:.2f})"
        print(f"{size:8d}  {full:12.1f}  {seq.passes:10.1f}  {ratio:6.3f}  "
              f"<={bound:.3f} {'ok' if ratio <= bound + 1e-9 else 'MISSED':>6}  {timing:>6}  {len(disagree)}"
              + (f": {'; '.join(disagree[:5])}" if disagree else ""))
        strict = replay(base, outcomes, seeds, size, params_with(interim_share=0.2), margins)
        print(f"          interim_share 0.2 (1% per side instead of 2.5%): {strict.passes:.1f} passes, ratio "
              f"{strict.passes / full:.3f}")
        bare = replay(base, outcomes, seeds, size, params_with(census_share=0.0), margins)
        shares = {share: replay(base, outcomes, seeds, size, params_with(census_share=share), margins).passes
                  for share in (0.02, 0.03, 0.08)}
        print("          other census shares: " + ", ".join(f"{share:.0%} {p:.1f} passes ({p / full:.3f})"
                                                        for share, p in shares.items()))
        held = seq.order[:seq.census]
        flips = sum(int((outcomes[k][:size] != base[:size]).sum()) for k in outcomes)
        in_census = sum(int((outcomes[k][:size][held] != base[:size][held]).sum()) for k in outcomes)
        print(f"          without the census (census_share 0): {bare.passes:.1f} passes, ratio {bare.passes / full:.3f}, "
              f"{len(disagreements(exact, bare))} disagreements; the census ({seq.census} examples, {seq.census / size:.0%}) held "
              f"{in_census} of the {flips} changed predictions ({in_census / max(flips, 1):.0%})")
        alpha = params.interim_share * (1 - params.confidence)
        hindsight = hindsight_passes(base, outcomes, size, tolerance, alpha, params.sequential_block,
                                     params.sequential_growth)
        fine = replay(base, outcomes, seeds, size,
                      params_with(sequential_block=32, sequential_growth=1.001, census_share=0.0), margins)
        fine_hindsight = hindsight_passes(base, outcomes, size, tolerance, alpha, 32, 1.001)
        print(f"          without the census, the best constant bet in hindsight (a reference no betting sequence is "
              f"expected to beat): "
              f"{hindsight:.1f} passes, ratio {hindsight / full:.3f}; with a look every 32 examples {fine_hindsight:.1f} "
              f"({fine_hindsight / full:.3f}), where the probe's rule takes {fine.passes:.1f} ({fine.passes / full:.3f})")
        used = sorted(s.seen for s in seq.units if s.key.startswith("L"))
        print(f"          single heads: median {used[len(used) // 2]} examples used of {size}; "
              f"{sum(s.settled == 'within' for s in seq.units)} units within, "
              f"{sum(s.settled == 'straddles' for s in seq.units)} straddling at the end; exact: "
              f"{sum(c == 'within' for c in exact.values())} within, "
              f"{sum(c == 'straddles' for c in exact.values())} straddling")


if __name__ == "__main__":
    main()
