#!/usr/bin/env python3
"""CPU training and inference speed of float32, bfloat16 and float16 under LibTorch 1.13 and 2.x,
same run: the same two benchmarks built against each LibTorch, run in alternating rounds.

  bench_mixed_precision_step  a force-training step and an inference step of an MLP of width 64
                              and 256 (the network-bound case); 2.x also runs native float16
  bench_training_step         one optimizer step of the default potential (committee 4) and its
                              inference, with the main example's hidden [32, 32] and wider
                              networks (--hidden); with 2.x once with OTF_CPU_FLOAT16=native and
                              once with emulated

Each run already interleaves its precisions, so the ratios to float32 are same-run ratios; the
table gives the medians over the rounds of times and of those ratios. Writes PREFIX.txt and
PREFIX.tsv (--out). Needs only the Python standard library.

  bench/bench_libtorch_versions.py --old build-torch113/bench --new build/bench \\
      --out docs/libtorch-versions-bench-xeon
"""
import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import cpu_description, parse_training_step, run_checked, write_report  # noqa: E402


def parse_mixed(text):
    """{(width, precision): (train_ms, train_ratio, infer_ms, infer_ratio)} and the LibTorch line."""
    rows, version = {}, ""
    for line in text.splitlines():
        if line.startswith("# LibTorch"):
            version = line[2:]
        words = line.split()
        if len(words) == 6 and words[0].isdigit():
            rows[(int(words[0]), words[1])] = tuple(float(w) for w in words[2:])
    return rows, version


def parse_training(text):
    """{precision: (step_us, inference_us)} per atom."""
    results = parse_training_step(text)
    return {p: (results[("step", p)], results[("inference", p)]) for what, p in results if what == "step"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="bench folder of the LibTorch 1.13 build")
    parser.add_argument("--new", required=True, help="bench folder of the LibTorch 2.x build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--atoms", type=int, default=4096, help="atoms of bench_mixed_precision_step")
    parser.add_argument("--widths", default="64,256")
    parser.add_argument("--cells", type=int, default=4, help="diamond cells per side of bench_training_step (4: 512 atoms)")
    parser.add_argument("--hidden", default="32,32;128,128;256,256",
                        help="hidden widths of the potential's networks, ';' between settings")
    parser.add_argument("--out", help="write PREFIX.txt and PREFIX.tsv")
    args = parser.parse_args()

    builds = {"1.13": Path(args.old), "2.x": Path(args.new)}
    mixed = {name: [] for name in builds}
    hidden_settings = args.hidden.split(";")
    training = {(h, name): [] for h in hidden_settings for name in ("1.13", "2.x native", "2.x emulated")}
    versions = {}
    for _ in range(args.rounds):
        for name, folder in builds.items():
            text = run_checked([str(folder / "bench_mixed_precision_step"), "--atoms", str(args.atoms), "--repeats", "3",
                                "--threads", str(args.threads), "--widths", args.widths], args.threads)
            rows, versions[name] = parse_mixed(text)
            mixed[name].append(rows)
        for hidden in hidden_settings:
            for name, folder, mode in (("1.13", builds["1.13"], "emulated"), ("2.x native", builds["2.x"], "native"),
                                       ("2.x emulated", builds["2.x"], "emulated")):
                text = run_checked([str(folder / "bench_training_step"), "--cells", str(args.cells), "--repeats", "7",
                                    "--threads", str(args.threads), "--hidden", hidden], args.threads,
                                   {"OTF_CPU_FLOAT16": mode})
                training[(hidden, name)].append(parse_training(text))

    med = statistics.median
    lines = [f"# CPU: {cpu_description()}; {args.threads} thread(s); medians of {args.rounds} alternating rounds",
             f"# old: {versions['1.13']}; new: {versions['2.x']}",
             "# ratio = float32 time of the same run / this time (above 1: faster than float32)",
             "", f"## MLP force training (bench_mixed_precision_step, {args.atoms} atoms): ms per step",
             f"{'width':>5}  {'precision':<17} {'train_old':>9} {'ratio':>6} {'train_new':>9} {'ratio':>6} "
             f"{'infer_old':>9} {'ratio':>6} {'infer_new':>9} {'ratio':>6}"]
    tsv = ["benchmark\tsize\tprecision\tlibtorch\ttrain\ttrain_ratio\tinference\tinference_ratio"]
    keys = sorted({k for rounds in mixed.values() for rows in rounds for k in rows},
                  key=lambda k: (k[0], ["float32", "bfloat16", "float16-emulated", "float16-native"].index(k[1])))
    for key in keys:
        cells = []
        for name in builds:
            runs = [rows[key] for rows in mixed[name] if key in rows]
            stats = [med(r[i] for r in runs) for i in range(4)] if runs else [float("nan")] * 4
            cells.append(stats)
            if runs:
                tsv.append(f"mlp\t{key[0]}\t{key[1]}\t{name}\t" + "\t".join(f"{v:.3f}" for v in stats))
        fmt = lambda v: f"{v:9.1f}" if v == v else f"{'-':>9}"
        ratio = lambda v: f"{v:6.2f}" if v == v else f"{'-':>6}"
        lines.append(f"{key[0]:>5}  {key[1]:<17} {fmt(cells[0][0])} {ratio(cells[0][1])} {fmt(cells[1][0])} "
                     f"{ratio(cells[1][1])} {fmt(cells[0][2])} {ratio(cells[0][3])} {fmt(cells[1][2])} {ratio(cells[1][3])}")

    lines += ["", f"## the default potential, committee 4 (bench_training_step, {8 * args.cells ** 3} atoms): us per atom",
              f"{'hidden':<8} {'libtorch / float16':<20} {'precision':<9} {'step':>8} {'ratio':>6} {'inference':>9} {'ratio':>6}"]
    for (hidden, name), runs in training.items():
        for precision in ("float32", "bfloat16", "float16"):
            step = med(r[precision][0] for r in runs)
            inference = med(r[precision][1] for r in runs)
            step_ratio = med(r["float32"][0] / r[precision][0] for r in runs)
            inference_ratio = med(r["float32"][1] / r[precision][1] for r in runs)
            lines.append(f"{hidden:<8} {name:<20} {precision:<9} {step:8.1f} {step_ratio:6.2f} {inference:9.2f} "
                         f"{inference_ratio:6.2f}")
            tsv.append(f"potential[{hidden}]\t{8 * args.cells ** 3}\t{precision}\t{name}\t{step:.3f}\t"
                       f"{step_ratio:.3f}\t{inference:.3f}\t{inference_ratio:.3f}")
    write_report(args.out, "\n".join(lines), tsv)


if __name__ == "__main__":
    main()
