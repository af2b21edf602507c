"""What the Python benchmark drivers share (standard library only): the CPU a benchmark ran on,
for its output header (lscpu's model name and the flags that decide whether lower precision can
pay: AVX-512 BF16/FP16, AMX); running a benchmark binary; reading bench_training_step's
measurements; writing a report as PREFIX.txt and PREFIX.tsv."""
import os
import subprocess
import sys
from pathlib import Path


def cpu_model():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cpu_flags():
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return sorted(f for f in flags if f.startswith(("avx512_bf16", "avx512_fp16", "amx")))


def cpu_description():
    return f"{cpu_model()}; flags: {' '.join(cpu_flags()) or 'no avx512_bf16/avx512_fp16/amx'}"


def run_checked(command, threads, env_extra=None):
    """stdout of `command` run with OMP_NUM_THREADS=threads (and env_extra); exits on failure."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), **(env_extra or {}))
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def parse_training_step(text):
    """bench_training_step's measurements: {(what, precision): microseconds per atom}, what being
    inference, step or step_generic."""
    results = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] in ("inference", "step", "step_generic"):
            results[(words[0], words[1])] = float(words[2])
    return results


def write_report(prefix, text, tsv_lines):
    """Prints the report and, with a prefix, writes it to PREFIX.txt and the table to PREFIX.tsv."""
    print(text)
    if prefix:
        Path(prefix + ".txt").write_text(text + "\n")
        Path(prefix + ".tsv").write_text("\n".join(tsv_lines) + "\n")
