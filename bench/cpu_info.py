"""The CPU a benchmark ran on, for its output header: lscpu's model name and the flags that decide
whether lower precision can pay (AVX-512 BF16/FP16, AMX). Standard library only."""
import subprocess
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
