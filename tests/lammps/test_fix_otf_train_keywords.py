"""fix otf/train's training keywords do what they say, checked in the thermo output:
* accumulate N: the optimizer steps once per N batches (half the steps of the same run without);
* lr_schedule step S G: the learning rate (element 15) is lr * G^floor(steps / S) after `steps`
  optimizer steps; lr_schedule plateau lowers it when the validation loss stops improving;
* ema D: training is unchanged (identical loss history) but the saved model holds the averaged
  weights, a different model that still loads and evaluates;
* weights E F S with S > 0: stress labels are trained on; the validation stress RMSE (element 4)
  falls by at least 3x (and is 0 without stress training).
"""
import math

from lammps_harness import expect, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, fix_output, write_argon_spec

# The fix's outputs by name (training/trainer_outputs.h, doc/fix_otf_train.md).
LOSS, STRESS_RMSE = fix_output("loss"), fix_output("stress_rmse")
OPTIMIZER_STEPS, LEARNING_RATE = fix_output("optimizer_steps"), fix_output("learning_rate")
BASE = f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 2 batch 2 lr 3e-3 validation 0.3 drive reference"


def train(ctx, spec, name, keywords="", steps=60):
    return run_lammps(ctx, argon_script(ctx, spec, fix=f"{BASE} {keywords}", steps=steps),
                      name=f"in.{name}")


def test(ctx):
    spec = write_argon_spec(ctx)
    plain = train(ctx, spec, "plain")
    accumulated = train(ctx, spec, "accumulate", "accumulate 2 lr_schedule step 10 0.5")
    steps_plain, steps_accumulated = plain.last(OPTIMIZER_STEPS), accumulated.last(OPTIMIZER_STEPS)
    print(f"optimizer steps: {steps_plain:.0f} without accumulation, {steps_accumulated:.0f} "
          f"with accumulate 2")
    expect(steps_plain > 20 and steps_accumulated == steps_plain // 2,
           "accumulate 2 must halve the optimizer steps")
    expected_lr = 3e-3 * 0.5 ** (steps_accumulated // 10)
    lr = accumulated.last(LEARNING_RATE)
    print(f"lr_schedule step 10 0.5: learning rate {lr:.6g} after {steps_accumulated:.0f} steps "
          f"(expected {expected_lr:.6g}); without a schedule {plain.last(LEARNING_RATE):.6g}")
    expect(abs(lr - expected_lr) <= 1e-12 * expected_lr, "step schedule: wrong learning rate")
    expect(plain.last(LEARNING_RATE) == 3e-3, "without a schedule the learning rate must stay")

    plateau = train(ctx, spec, "plateau", "lr_schedule plateau 0.5 0", steps=100)
    rates = [row[LEARNING_RATE] for row in plateau.thermo[-1]]
    print(f"lr_schedule plateau 0.5 0: learning rates {sorted(set(rates), reverse=True)}")
    expect(rates[-1] < 3e-3 and all(b <= a for a, b in zip(rates, rates[1:])),
           "the plateau schedule never lowered the learning rate")

    live_model, ema_model = ctx.workdir / "live.otf", ctx.workdir / "ema.otf"
    live = train(ctx, spec, "live", f"save {live_model}")
    averaged = train(ctx, spec, "ema", f"ema 0.9 save {ema_model}")
    losses_live = [row[LOSS] for row in live.thermo[-1]]
    losses_ema = [row[LOSS] for row in averaged.thermo[-1]]
    expect(losses_live == losses_ema, "ema changed the training itself")
    expect(live_model.read_bytes() != ema_model.read_bytes(), "ema: the saved model is the live one")
    energies = {}
    for name, model in (("live", live_model), ("ema", ema_model)):
        energies[name] = run_lammps(ctx, argon_script(ctx, model, steps=0),
                                    name=f"in.load-{name}").last("PotEng")
    print(f"ema 0.9: identical loss history; saved models give pe {energies['live']:.6g} (live "
          f"weights) and {energies['ema']:.6g} (averaged weights)")
    expect(math.isfinite(energies["ema"]) and energies["ema"] != energies["live"],
           "the averaged model does not evaluate differently")

    stress = train(ctx, spec, "stress", "weights 1 10 1", steps=200)
    rmse = [row[STRESS_RMSE] for row in stress.thermo[-1] if row[STRESS_RMSE] > 0]
    expect(len(rmse) >= 2, "no validation stress RMSE reported")
    print(f"weights 1 10 1: validation stress RMSE {rmse[0]:.4g} -> {rmse[-1]:.4g} "
          f"(x{rmse[0] / rmse[-1]:.1f} lower); without stress weight it is "
          f"{plain.last(STRESS_RMSE):g}")
    expect(rmse[0] / rmse[-1] >= 3.0, "stress training: the stress RMSE did not fall 3x")
    expect(plain.last(STRESS_RMSE) == 0.0, "stress RMSE reported without stress training")


if __name__ == "__main__":
    main(test)
