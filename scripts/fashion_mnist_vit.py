"""Fashion-MNIST with a ViT-style encoder: FEM-SM (encoder mode) against softmax attention at matched parameters,
with linear attention and ELA (bidirectional), three seeds each, test accuracy after a fixed CPU budget.

    .venv/bin/python scripts/fashion_mnist_vit.py [--out runs/fashion_mnist] [--steps 1000] [--seeds 0,1,2]

Every run is `seqmix train --task fashion_mnist:patch=4 --model vit` (4 blocks of width 64, 49 patch tokens of 16
pixels, batch 64, `--steps` steps, validation every 250), so the budget is the same number of steps and examples for
every mixer; each mixer other than softmax is sized to softmax's parameter count with --match-params (the option it
solves is named below). `--seeds` runs go into OUT/<mixer>/seed-S and resume when the script is run again. The test
accuracy is `seqmix eval --task-option heldout=test` of each run's final checkpoint on the 10,000 test images
(the validation split, carved from training, is what the runs evaluate on while training). Prints a markdown table
of test accuracy mean ± sample std and writes OUT/results.json and the curves of seed 0, docs/img/fashion_mnist_vit.png.
HyperGLU and FEM on the GLA prior have no encoder (bidirectional) mode and are not run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQMIX = os.path.join(ROOT, "build", "seqmix")
REFERENCE = "softmax:causal=0"
# name -> (mixer spec, the option --match-params solves, or None for the reference itself)
MIXERS = {
    "softmax": (REFERENCE, None),
    "fem_sm": ("fem:prior=softmax,causal=0", "mixer.qk_dim"),
    "linear": ("linear:causal=0", "model.dim"),
    "ela": ("ela:causal=0", "model.dim"),
}


def run(args, **kw):
    done = subprocess.run(args, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        sys.exit(f"fashion_mnist_vit: {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "runs", "fashion_mnist"))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--mixers", default=",".join(MIXERS))
    a = parser.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    results = {"steps": a.steps, "seeds": seeds, "mixers": {}}
    for name in a.mixers.split(","):
        spec, match_option = MIXERS[name]
        out = os.path.join(a.out, name)
        command = [SEQMIX, "train", "--task", "fashion_mnist:patch=4", "--model", "vit:dim=64,layers=4",
                   "--mixer", spec, "--steps", str(a.steps), "--batch-size", "64", "--set", "train.eval_every=250",
                   "--set", "train.warmup=100", "--seeds", a.seeds, "--threads", str(a.threads), "--out", out]
        if match_option:
            command += ["--match-params", REFERENCE, "--match-option", match_option]
        print(f"{name}: {' '.join(command[1:])}", flush=True)
        log = run(command)
        matched = [line[len("matched  "):] for line in log.splitlines() if line.startswith("matched  ")]
        tests, vals, params = [], [], None
        for seed in seeds:
            folder = os.path.join(out, f"seed-{seed}")
            test = json.loads(run([SEQMIX, "eval", "--run", folder, "--task-option", "heldout=test", "--json",
                                   "--threads", str(a.threads)]))
            tests.append(test["accuracy"])
            with open(os.path.join(folder, "summary.json")) as f:
                summary = json.load(f)
            vals.append(summary["final"]["accuracy"])
            params = summary["parameters"]
        results["mixers"][name] = {"spec": spec, "parameters": params, "matched": matched[0] if matched else None,
                                   "test_accuracy": tests, "val_accuracy": vals}
        print(f"  test accuracy per seed {tests}", flush=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(f"\n| mixer | parameters | test accuracy (mean ± std, {len(seeds)} seeds) | validation accuracy |")
    print("|---|---|---|---|")
    for name, r in results["mixers"].items():
        t, v = r["test_accuracy"], r["val_accuracy"]
        sd = lambda x: statistics.stdev(x) if len(x) > 1 else 0.0
        print(f"| {r['spec']} | {r['parameters']:,} | {statistics.mean(t):.4f} ± {sd(t):.4f} | "
              f"{statistics.mean(v):.4f} ± {sd(v):.4f} |")
    curves = [os.path.join(a.out, name, f"seed-{seeds[0]}") for name in results["mixers"]]
    run([SEQMIX, "plot", *curves, "--out", os.path.join(ROOT, "docs", "img", "fashion_mnist_vit.png")])


if __name__ == "__main__":
    main()
