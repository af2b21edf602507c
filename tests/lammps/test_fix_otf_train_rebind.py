"""A pair_style command between runs while fix otf/train exists: the fix used to keep training
the deleted style's model object, silently. Now the next run stops with an error that names the
redefinition and says how to go on (unfix, new pair_style, new fix), on every rank and without a
crash; doing exactly that trains the new model.
"""
from lammps_harness import expect, expect_in, main, run_lammps
from pair_otf_common import ARGON_LJ_REFERENCE, argon_script, write_argon_spec

FIX = f"{ARGON_LJ_REFERENCE} every 2 steps_per_frame 1 lr 3e-3 drive reference"


def test(ctx):
    spec = write_argon_spec(ctx)
    redefined = argon_script(ctx, spec, fix=FIX, steps=10) + (
        f"pair_style otf {spec}\npair_coeff * * Ar\nrun 10\n")
    result = run_lammps(ctx, redefined, name="in.redefined", check=False)
    output = result.stdout + result.stderr + result.log
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    expect(result.returncode != 0 and errors, f"no error after the redefinition:\n{output[-2000:]}")
    expect(any("pair_style otf was redefined" in line and "unfix t" in line for line in errors),
           "the error does not name the redefinition and the way out:\n" + "\n".join(errors))
    for bad in ("Segmentation fault", "terminate called", "core dumped"):
        expect(bad not in output, f"crashed ({bad})")
    first_run = result.thermo[0]
    expect(first_run[-1]["f_t[7]"] > 0, "the first run did not train")
    print(f"redefined pair_style: {errors[0]}")

    model = ctx.workdir / "first.otf"
    proper = argon_script(ctx, spec, fix=FIX + f" save {model}", steps=10) + (
        f"unfix t\npair_style otf {model}\npair_coeff * * Ar\nfix t all otf/train {FIX}\n"
        f"run 10\n")
    result = run_lammps(ctx, proper, name="in.proper")
    expect_in("model saved to", result.log)
    second_run = result.thermo[-1]
    expect(second_run[-1]["f_t[7]"] > 0, "the new fix did not train the new model")
    expect(second_run[-1]["f_t[1]"] > 0, "the new fix reports no loss")
    print(f"unfix, pair_style, fix: {second_run[-1]['f_t[7]']:.0f} optimizer steps on the new model")


if __name__ == "__main__":
    main(test)
