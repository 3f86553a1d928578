"""The release `recon` binary the benchmark scripts call: $RECON, or the release build of this
checkout (cargo's target directory, as bench/run.sh builds it)."""
import json
import os
import subprocess


def recon_bin():
    if os.environ.get("RECON"):
        return os.environ["RECON"]
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        capture_output=True, text=True, check=True,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    ).stdout
    return os.path.join(json.loads(out)["target_directory"], "release", "recon")
