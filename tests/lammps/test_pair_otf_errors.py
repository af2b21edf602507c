"""pair_style otf and compute otf/atom turn every bad input into a LAMMPS error with a message that
says what is wrong (and never crash): bad precision, unknown keyword, bad chunk, a float64 model
with a lower precision, wrong pair_coeff, a NULL or unknown element, a unit system other than the
model's, a missing, corrupt or invalid model file, a missing pair_coeff, compute otf/atom without
the pair style.
"""
from lammps_harness import expect, fail, main, run_lammps
from pair_otf_common import plugin_header, write_crystal, write_spec


def expect_error(ctx, label, body, *messages, units="metal"):
    data = ctx.workdir / "crystal.data"
    script = plugin_header(ctx, units=units) + f"read_data {data}\n" + body + "\nrun 0\n"
    result = run_lammps(ctx, script, name=f"in.{label}", check=False)
    output = result.stdout + result.stderr + result.log
    expect(result.returncode != 0, f"{label}: lmp should have failed; output tail:\n"
                                   f"{output[-1500:]}")
    error_lines = [line for line in output.splitlines() if line.startswith("ERROR")]
    expect(error_lines, f"{label}: no ERROR line; output tail:\n{output[-1500:]}")
    for message in messages:
        if not any(message in line for line in error_lines):
            fail(f"{label}: no ERROR line contains {message!r}; ERROR lines:\n"
                 + "\n".join(error_lines))
    for bad in ("Segmentation fault", "terminate called", "core dumped", "MPI_ABORT"):
        expect(bad not in output, f"{label}: lmp crashed ({bad}) instead of a clean error")
    print(f"{label}: {error_lines[0]}")


def test(ctx):
    write_crystal(ctx, "crystal.data", cells=(1, 1, 1))
    spec = write_spec(ctx, "spec.json")
    spec32 = write_spec(ctx, "spec32.json", dtype="float32")
    coeff = "pair_coeff * * Si C"

    expect_error(ctx, "bad-precision", f"pair_style otf {spec32} precision half\n{coeff}",
                 "unknown precision 'half'", "float32, bfloat16, float16", "fp32, bf16, fp16")
    expect_error(ctx, "unknown-keyword", f"pair_style otf {spec32} speed 3\n{coeff}",
                 "unknown keyword 'speed'", "expected one of: precision, chunk")
    expect_error(ctx, "missing-value", f"pair_style otf {spec32} precision\n{coeff}",
                 "keyword 'precision' needs a value")
    expect_error(ctx, "bad-chunk", f"pair_style otf {spec32} chunk 0\n{coeff}",
                 "chunk must be at least 1")
    expect_error(ctx, "chunk-not-a-number", f"pair_style otf {spec32} chunk many\n{coeff}",
                 "Expected integer")
    expect_error(ctx, "float64-bf16", f"pair_style otf {spec} precision bf16\n{coeff}",
                 "precision bfloat16 needs a float32 model")
    expect_error(ctx, "no-model", "pair_style otf", "expected pair_style otf <model file")

    expect_error(ctx, "coeff-count", f"pair_style otf {spec}\npair_coeff * * Si",
                 "one element (or NULL) per atom type (2 types")
    # Releases after 29 Sep 2021 refuse it in LAMMPS' own pair_coeff, before the style sees it.
    expect_error(ctx, "coeff-types", f"pair_style otf {spec}\npair_coeff 1 2 Si C",
                 "Incorrect args for pair coefficients" if ctx.lammps_version_id <= 20210929
                 else "Pair_coeff must start with * * for pair style otf")
    expect_error(ctx, "null-element", f"pair_style otf {spec}\npair_coeff * * Si NULL",
                 "atom type 2 is NULL", "hybrid")
    expect_error(ctx, "unknown-element", f"pair_style otf {spec}\npair_coeff * * Si Ge",
                 "element 'Ge' (atom type 2) is not in the model", "elements are: Si C")
    expect_error(ctx, "no-coeff", f"pair_style otf {spec}", "All pair coeffs are not set")

    expect_error(ctx, "wrong-units", f"pair_style otf {spec}\n{coeff}",
                 "is in 'metal' units but this input uses 'units real'", units="real")

    expect_error(ctx, "missing-file", f"pair_style otf {ctx.workdir}/absent.model\n{coeff}",
                 "cannot load the model", "absent.model", "No such file")
    (ctx.workdir / "garbage.model").write_bytes(b"OTF?" + bytes(range(256)) * 4)
    expect_error(ctx, "corrupt-file", f"pair_style otf {ctx.workdir}/garbage.model\n{coeff}",
                 "garbage.model", "not an OTF-Torch model file")
    (ctx.workdir / "empty.model").write_bytes(b"")
    expect_error(ctx, "empty-file", f"pair_style otf {ctx.workdir}/empty.model\n{coeff}",
                 "empty.model", "empty")
    (ctx.workdir / "broken.json").write_text('{"elements": ["Si", "C"], "cutoff": 4.0,')
    expect_error(ctx, "broken-spec", f"pair_style otf {ctx.workdir}/broken.json\n{coeff}",
                 "broken.json", "not valid JSON")
    (ctx.workdir / "typo.json").write_text('{"elements": ["Si", "C"], "cutof": 4.0}')
    expect_error(ctx, "spec-unknown-key", f"pair_style otf {ctx.workdir}/typo.json\n{coeff}",
                 "unknown key 'cutof'")

    expect_error(ctx, "compute-without-pair",
                 "pair_style zero 3.0\npair_coeff * *\ncompute u all otf/atom",
                 "compute otf/atom needs pair_style otf")
    expect_error(ctx, "compute-arguments",
                 f"pair_style otf {spec}\n{coeff}\ncompute u all otf/atom extra",
                 "no further arguments")


if __name__ == "__main__":
    main(test)
