"""Regenerate the shipped MEASURED reuse profile (``src/kaleido/assets/profiles/tiny_wan_default.json``).

The profile is the trace of one ``kaleido generate`` run of the shipped miniature pipeline with
the default ``KaleidoConfig`` (the first evaluation prompt, seed 0), converted by the simulator's
own adapter (``kaleido.hw.inputs.trace_adapter.profile_from_trace``).
Pass the trace of the first run of the evaluation of ``docs/results/README.md``::

    python benchmarks/measured_profile.py out/eval_default/run-0/trace.safetensors

or let the script run that one generation itself (``--generate``, ~30 s).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from kaleido.hw.inputs.trace_adapter import profile_from_trace
from kaleido.evaluation.generate import EVAL_PROMPTS
from kaleido.trace import ReuseTrace

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "src" / "kaleido" / "assets" / "profiles" / "tiny_wan_default.json"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace", nargs="?", help="trace.safetensors of a `kaleido generate` run (default config)")
    p.add_argument("--generate", metavar="OUT", help="run `kaleido generate` into OUT first and use its trace")
    p.add_argument("--out", default=str(TARGET), help="profile JSON to write")
    a = p.parse_args()
    prompt = EVAL_PROMPTS[0]
    if a.generate:
        subprocess.run([sys.executable, "-m", "kaleido.cli.main", "generate", "--model", "tiny", "--prompt", prompt,
                        "--seed", "0", "--out", a.generate], check=True)
        trace_path = next(Path(a.generate).rglob("trace.safetensors"))
    elif a.trace:
        trace_path = Path(a.trace)
    else:
        raise SystemExit("give a trace.safetensors path or --generate OUT")
    trace = ReuseTrace.load(trace_path)
    profile, notes = profile_from_trace(trace)
    profile.label = (f"MEASURED: shipped tiny-wan pipeline, default KaleidoConfig, {prompt!r}, seed 0, "
                     f"{trace.meta.get('num_steps', '?')} steps, 17x64x64 (kaleido generate, docs/results/README.md)")
    profile.save(a.out)
    for n in notes:
        print("note:", n)
    print(f"wrote {a.out} from {trace_path}")


if __name__ == "__main__":
    main()
