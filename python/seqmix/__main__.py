"""`python -m seqmix verify ...`: the certificates of seqmix.verify for registered mixers (`seqmix verify` runs
this; docs/verify.md). `python -m seqmix export-hf RUN OUT [--step N]`: a `seqmix train` text run as a Hugging Face
transformers folder (seqmix.hf.export_run; needs the hf extra)."""
import argparse
import sys

USAGE = "usage: python -m seqmix verify [--mixer SPEC ...] [--json] | export-hf RUN OUT [--step N] (see --help)"


def export_hf(argv):
    parser = argparse.ArgumentParser(prog="python -m seqmix export-hf",
                                     description="Writes a seqmix train text run as a Hugging Face transformers "
                                                 "folder (AutoModelForCausalLM, AutoTokenizer, pipeline, lm-eval).")
    parser.add_argument("run", help="the run directory (seqmix train --out)")
    parser.add_argument("out", help="the folder to write (new, or empty)")
    parser.add_argument("--step", type=int, help="the checkpoint's step (default: the latest)")
    args = parser.parse_args(argv)
    try:
        import seqmix.hf
    except ImportError as e:
        print(f"export-hf: needs transformers (pip install 'seqmix[hf]'): {e}", file=sys.stderr)
        return 1
    try:
        seqmix.hf.export_run(args.run, args.out, args.step)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"export-hf: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    newline = seqmix.hf.SeqmixTokenizer(vocab_file=f"{args.out}/tokenizer.model").newline_id
    print(f"export-hf: wrote {args.out} (lm-evaluation-harness: --model hf --model_args "
          f"pretrained={args.out},trust_remote_code=True,prefix_token_id={newline})")
    return 0


if len(sys.argv) < 2 or sys.argv[1] not in ("verify", "export-hf"):
    print(USAGE, file=sys.stderr)
    sys.exit(2)
if sys.argv[1] == "verify":
    from .verify import main
    sys.exit(main(sys.argv[2:]))
sys.exit(export_hf(sys.argv[2:]))
