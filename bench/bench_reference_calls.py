#!/usr/bin/env python3
"""Reference calls to reach an accuracy: fix otf/train's accuracy policy (drive auto accuracy,
calibrated uncertainty) against the threshold policy the main example used before it (drive auto
thresholds 0.06 0.3 0.8), on the main example's task (Si, 64 atoms, Stillinger-Weber as the
reference, NVT at 1000 K), measured in one run of this script:

1. Held-out sets: Stillinger-Weber MD at 600, 1000 and 1400 K from other velocities, 100
   configurations each (50 fs apart after 2 ps).
2. Each policy trains in segments (SEGMENTS x SEGMENT_STEPS steps at 1000 K); after every segment
   its model is saved and later tested on the 1000 K held-out set: the calls-to-accuracy curve
   (held-out force and energy RMSE against the reference calls made so far).
3. The accuracy policy's final 1000 K model on the 600 K and 1400 K sets (temperatures it was not
   trained at).
4. Heating: the accuracy policy's run goes on while the thermostat heats from 1000 K to 1500 K,
   then holds 1500 K: reference calls per segment (they rise when the MD goes somewhere new, and
   fall again once the model has learned it), and the heated model on the three sets.
5. Calibration, from the accuracy run's learning log: every label was predicted before it was
   learned (the calibrated force error from the labels before it, and the 90% per-atom bound),
   then compared with the reference: Spearman rank correlation of predicted and actual force
   errors over the labels, and the fraction of atoms whose error exceeded the predicted bound.

Usage: bench_reference_calls.py --lmp LMP --plugin-dir DIR [--precision float32]
                                [--out docs/bench-reference-calls]
Writes OUT.txt (the report), OUT.tsv (the curve) and OUT-calibration.tsv; plot with
bench/plot_reference_calls.py. Threads: OMP_NUM_THREADS, as set by the caller.
"""
import argparse
import csv
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "si-sw"
sys.path.insert(0, str(ROOT / "examples"))
from accuracy_report import dump_frames, thermo_runs  # noqa: E402  (the examples' own parsers)
SEGMENTS = 10
SEGMENT_STEPS = 300
HEATING_SEGMENTS = 10    # 5 heating 1000 -> 1500 K, 5 at 1500 K

SYSTEM = """units metal
boundary p p p
atom_modify map array
lattice diamond 5.431
region box block 0 2 0 2 0 2
create_box 1 box
create_atoms 1 box
mass 1 28.0855
timestep 0.001
"""

# The main example's fix before the accuracy policy (its README of 2026-11-30).
THRESHOLD_POLICY = ("every 5 steps_per_frame 2 batch 4 lr 3e-3 buffer 400 validation 0.1 seed 7 "
                    "drive auto thresholds 0.06 0.3 0.8 check_every 10")


def accuracy_policy_from_example():
    """The fix otf/train keywords of the main example as it is now, from `every` to before its
    learning log and save keywords."""
    text = (EXAMPLE / "in.si-sw-neural").read_text().replace("&\n", " ")
    line = re.search(r"^fix\s+train .*$", text, re.MULTILINE).group(0)
    return " ".join(re.search(r"(every .*?)\s+learning_log ", line).group(1).split())


def run_lmp(lmp, plugin_dir, work, name, text):
    (work / name).write_text(text)
    env = dict(os.environ, LAMMPS_PLUGIN_PATH=str(plugin_dir))
    result = subprocess.run([lmp, "-in", name, "-log", name + ".log"], cwd=work, env=env,
                            capture_output=True, text=True)
    log = (work / (name + ".log")).read_text() if (work / (name + ".log")).exists() else ""
    if result.returncode != 0:
        sys.exit(f"lmp failed on {name} in {work}:\n{result.stdout[-3000:]}\n"
                 f"{result.stderr[-2000:]}")
    return log


def errors(reference_dump, model_dump):
    """Force RMSE per component (eV/A) and energy RMSE (meV/atom) of the model's dump."""
    reference, model = dump_frames(reference_dump), dump_frames(model_dump)
    assert len(reference) == len(model) and reference, (reference_dump, model_dump)
    force_sq, components, energy_sq = 0.0, 0, 0.0
    for ref, mod in zip(reference, model):
        for atom, r in ref.items():
            force_sq += sum((mod[atom][k] - r[k]) ** 2 for k in range(3))
            components += 3
        e = (sum(m[3] for m in mod.values()) - sum(r[3] for r in ref.values())) / len(ref)
        energy_sq += e * e
    return math.sqrt(force_sq / components), 1000 * math.sqrt(energy_sq / len(reference))


def heldout_input(temperatures):
    text = SYSTEM + "pair_style sw\npair_coeff * * Si.sw Si\ncompute peatom all pe/atom\n"
    for k, t in enumerate(temperatures):
        text += f"""velocity all create {2 * t} {87287 + 31 * k} mom yes rot yes dist gaussian
fix md all nvt temp {t} {t} 0.1
run 2000
dump held all custom 50 heldout-{t}.dump id type x y z fx fy fz c_peatom
dump_modify held sort id format float %.10g
run 4950
undump held
unfix md
"""
    return text


def training_input(name, fix_keywords, precision, heating):
    text = SYSTEM + f"""velocity all create 2000.0 4928459 mom yes rot yes dist gaussian
pair_style otf si-spec.json
pair_coeff * * Si
fix md all nvt temp 1000.0 1000.0 0.1
fix train all otf/train reference "sw" coeff "* * Si.sw Si" precision {precision} {fix_keywords} &
    learning_log learning-{name}.csv
thermo_style custom step temp pe f_train[3] f_train[9] f_train[11] f_train[13] f_train[14] &
    f_train[18] f_train[19]
thermo {SEGMENT_STEPS}
"""
    for k in range(1, SEGMENTS + 1):
        text += f"run {SEGMENT_STEPS}\nshell cp si.otf {name}-{k}.otf\n"
    if heating:
        half = HEATING_SEGMENTS // 2
        text += f"unfix md\nfix md all nvt temp 1000.0 1500.0 0.1\n"
        for k in range(1, half + 1):
            text += f"run {SEGMENT_STEPS} start {SEGMENTS * SEGMENT_STEPS} stop " \
                    f"{(SEGMENTS + half) * SEGMENT_STEPS}\nshell cp si.otf heated-{k}.otf\n"
        text += "unfix md\nfix md all nvt temp 1500.0 1500.0 0.1\n"
        for k in range(half + 1, HEATING_SEGMENTS + 1):
            text += f"run {SEGMENT_STEPS}\nshell cp si.otf heated-{k}.otf\n"
    return text


def rerun_input(models_and_sets):
    text = SYSTEM + "pair_style zero 4.0\npair_coeff * *\n"
    for model, dataset, out in models_and_sets:
        text += f"""pair_style otf {model}
pair_coeff * * Si
compute peatom all pe/atom
dump m all custom 1 {out} id type x y z fx fy fz c_peatom
dump_modify m sort id format float %.10g
rerun {dataset} dump x y z box yes
undump m
uncompute peatom
"""
    return text


def spearman(a, b):
    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        r = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lmp", required=True)
    parser.add_argument("--plugin-dir", required=True)
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench-reference-calls"))
    parser.add_argument("--keep", help="work in this folder and keep it")
    options = parser.parse_args()
    work = Path(options.keep or tempfile.mkdtemp(prefix="otf-calls-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE / "si-spec-neural.json", work / "si-spec.json")
    policies = {"accuracy": accuracy_policy_from_example() + " save si.otf",
                "thresholds": THRESHOLD_POLICY + " save si.otf"}
    temperatures = (600, 1000, 1400)
    out = []

    def say(line=""):
        print(line, flush=True)
        out.append(line)

    run_lmp(options.lmp, options.plugin_dir, work, "in.heldout", heldout_input(temperatures))
    logs, seconds = {}, {}
    for name, keywords in policies.items():
        log = run_lmp(options.lmp, options.plugin_dir, work, f"in.train-{name}",
                      training_input(name, keywords, options.precision, name == "accuracy"))
        logs[name] = log
        seconds[name] = sum(float(t) for t in
                            re.findall(r"^Loop time of ([0-9.eE+-]+)", log, re.MULTILINE)
                            [:SEGMENTS])

    jobs = []
    for name in policies:
        for k in range(1, SEGMENTS + 1):
            jobs.append((f"{name}-{k}.otf", "heldout-1000.dump", f"eval-{name}-{k}.dump"))
    for t in temperatures:
        jobs.append((f"accuracy-{SEGMENTS}.otf", f"heldout-{t}.dump", f"eval-final-{t}.dump"))
        jobs.append((f"heated-{HEATING_SEGMENTS}.otf", f"heldout-{t}.dump", f"eval-heated-{t}.dump"))
    run_lmp(options.lmp, options.plugin_dir, work, "in.evaluate", rerun_input(jobs))

    say(f"Reference calls to accuracy, Si from Stillinger-Weber (64 atoms, 1000 K), precision "
        f"{options.precision}; held-out: 100 SW configurations per temperature")
    for name, keywords in policies.items():
        say(f"  {name:10s}: fix otf/train ... {keywords}")
    say("")
    curve = []
    say("policy      segment  step  reference calls  held-out force RMSE (eV/A)  energy RMSE (meV/atom)")
    for name in policies:
        runs = thermo_runs(work / f"in.train-{name}.log")
        for k in range(1, SEGMENTS + 1):
            last = runs[k - 1][-1]
            force, energy = errors(work / "heldout-1000.dump", work / f"eval-{name}-{k}.dump")
            curve.append((name, k, int(last["Step"]), int(last["f_train[9]"]), force, energy))
            say(f"{name:10s}  {k:7d}  {int(last['Step']):4d}  {int(last['f_train[9]']):15d}  "
                f"{force:26.4f}  {energy:22.3f}")
    say("")
    for name in policies:
        reached = [c for c in curve if c[0] == name and c[4] <= 0.06 and c[5] < 2.0]
        final = [c for c in curve if c[0] == name][-1]
        say(f"{name}: training wall time {seconds[name]:.1f} s for {SEGMENTS * SEGMENT_STEPS} "
            f"steps; {final[3]} reference calls in all, final held-out force RMSE {final[4]:.4f} "
            f"eV/A, energy {final[5]:.3f} meV/atom; first reaches force <= 0.06 eV/A and energy "
            f"< 2 meV/atom after " + (f"{reached[0][3]} calls (step {reached[0][2]})" if reached
                                      else "never within the run"))
    acc = [c for c in curve if c[0] == "accuracy"][-1][3]
    thr = [c for c in curve if c[0] == "thresholds"][-1][3]
    say(f"reference calls, thresholds / accuracy: {thr} / {acc} = {thr / max(acc, 1):.1f}x fewer")
    say("")
    say("Transfer: models tested at temperatures other than the one trained at")
    say("model                          600 K force/energy     1000 K force/energy    1400 K force/energy")
    for tag, label in (("final", "after 3000 steps at 1000 K"), ("heated", "after heating to 1500 K")):
        cells = []
        for t in temperatures:
            f, e = errors(work / f"heldout-{t}.dump", work / f"eval-{tag}-{t}.dump")
            cells.append(f"{f:.4f} / {e:.3f}")
        say(f"{label:30s} " + "   ".join(f"{c:20s}" for c in cells))
    say("")
    runs = thermo_runs(work / "in.train-accuracy.log")
    say("Heating (accuracy policy, continuing): reference calls per segment of "
        f"{SEGMENT_STEPS} steps")
    previous = int(runs[SEGMENTS - 1][-1]["f_train[9]"])
    heating_rows = []
    for k in range(HEATING_SEGMENTS):
        rows = runs[SEGMENTS + k]
        calls = int(rows[-1]["f_train[9]"])
        temperature = sum(r["Temp"] for r in rows) / len(rows)
        phase = "1000 -> 1500 K" if k < HEATING_SEGMENTS // 2 else "1500 K"
        heating_rows.append((k + 1, phase, int(rows[-1]["Step"]), calls - previous, temperature))
        say(f"  segment {k + 1:2d} ({phase:14s}) to step {int(rows[-1]['Step'])}: "
            f"{calls - previous:3d} calls (mean T {temperature:.0f} K)")
        previous = calls
    say("")
    with open(work / "learning-accuracy.csv") as log:
        rows = [r for r in csv.DictReader(log)]
    labels = [r for r in rows if r["event"] == "label" and float(r["atoms_above_bound"]) >= 0]
    predicted = [float(r["predicted_force_error"]) for r in labels]
    actual = [float(r["label_force_error"]) for r in labels]
    above = [float(r["atoms_above_bound"]) for r in labels]
    model_labels = [r for r in labels if r["drive"] == "model"]
    say(f"Calibration (accuracy run, {len(labels)} labels, each predicted before it was learned "
        f"with the calibration of the labels before it):")
    say(f"  Spearman rank correlation of predicted and actual force error per label: "
        f"{spearman(predicted, actual):.3f}")
    say(f"  atoms whose force error exceeded the predicted 90% bound: "
        f"{100 * sum(above) / len(above):.1f}% (mean over labels)")
    if model_labels:
        mp = [float(r["predicted_force_error"]) for r in model_labels]
        ma = [float(r["label_force_error"]) for r in model_labels]
        mab = [float(r["atoms_above_bound"]) for r in model_labels]
        say(f"  of them labelled while the model drove ({len(model_labels)}): Spearman "
            f"{spearman(mp, ma):.3f}, above the 90% bound {100 * sum(mab) / len(mab):.1f}%")
    summary = re.findall(r"^fix otf/train: (calibration over .*)$", logs["accuracy"], re.MULTILINE)
    if summary:
        say(f"  at the end of the 1000 K training: {summary[SEGMENTS - 1]}")

    Path(options.out + ".txt").write_text("\n".join(out) + "\n")
    with open(options.out + ".tsv", "w") as tsv:
        tsv.write("policy\tsegment\tstep\treference_calls\tforce_rmse\tenergy_rmse_mev\n")
        for row in curve:
            tsv.write("\t".join(str(v) for v in row) + "\n")
    with open(options.out + "-calibration.tsv", "w") as tsv:
        tsv.write("step\tdrive\tpredicted_force_error\tlabel_force_error\tatoms_above_bound\n")
        for r in labels:
            tsv.write(f"{r['step']}\t{r['drive']}\t{r['predicted_force_error']}\t"
                      f"{r['label_force_error']}\t{r['atoms_above_bound']}\n")
    with open(options.out + "-heating.tsv", "w") as tsv:
        tsv.write("segment\tphase\tstep\tcalls\tmean_temperature\n")
        for row in heating_rows:
            tsv.write("\t".join(str(v) for v in row) + "\n")
    if not options.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
