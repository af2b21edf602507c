"""The main example (examples/si-sw) runs as the README's first command runs it, and its accuracy
report passes with the targets of issue 39 for the defaults: held-out force RMSE <= 0.05 eV/A,
energy RMSE < 2 meV/atom on 100 configurations at 1000 K, at most 3 reference calls in all and at
most 10% while the model drives, 10 ps of NVE with the learned model.
The input is the example's own (copied to a scratch folder with the report script); the plugin is
loaded with `plugin load` instead of LAMMPS_PLUGIN_PATH.
"""
import re
import shutil
import subprocess
import sys

from lammps_harness import expect, main, run_lammps


def test(ctx):
    examples = ctx.source_dir.parent.parent / "examples"
    shutil.copy(examples / "si-sw" / "si-spec.json", ctx.workdir)
    script = f"plugin load {ctx.plugin}\n" + (examples / "si-sw" / "in.si-sw").read_text()
    run_lammps(ctx, script, name="in.si-sw", timeout=1200)
    report = subprocess.run([sys.executable, str(examples / "accuracy_report.py"), "in.si-sw.log",
                             "--label", "configurations at 1000 K", "--force-target", "0.05",
                             "--energy-target", "2", "--max-calls", "3"], cwd=ctx.workdir,
                            capture_output=True, text=True)
    print(report.stdout)
    expect(report.returncode == 0, f"the accuracy report failed:\n{report.stdout}{report.stderr}")
    expect(len(re.findall(r"^PASS ", report.stdout, re.MULTILINE)) == 5,
           "the report does not list five passed targets")


if __name__ == "__main__":
    main(test)
