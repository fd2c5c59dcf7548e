"""transformers' generate on a seqmix language model, with seqmix's decode states as the cache (one step per new token)
against without a cache (a forward over the whole prefix per new token), at a long context: tokens/s of the new
tokens, greedy, batch 1, on the CPU, in one run (the same model, prompt and thread count).

    .venv/bin/python bench/hf_generate.py [--context 1024] [--new-tokens 32] [--threads 2] [--dim 128] [--layers 2]
"""
import argparse
import time

import torch

import seqmix.hf


def tokens_per_second(model, prompt, new_tokens, use_cache):
    begin = time.perf_counter()
    out = model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                         use_cache=use_cache)
    seconds = time.perf_counter() - begin
    return new_tokens / seconds, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=1024, help="prompt tokens")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--mixers", default="fem:prior=gla;softmax:heads=4", help="mixer specs separated by ;")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = seqmix.hf.SeqmixConfig(model_spec=f"lm:dim={args.dim},layers={args.layers}",
                                    mixers=args.mixers.split(";"), vocab_size=256)
    model = seqmix.hf.SeqmixForCausalLM(config).eval()
    prompt = torch.randint(0, 256, (1, args.context))
    model.generate(prompt[:, :16], max_new_tokens=2, do_sample=False)  # warm-up
    cached, with_cache = tokens_per_second(model, prompt, args.new_tokens, True)
    uncached, without_cache = tokens_per_second(model, prompt, args.new_tokens, False)
    same = torch.equal(with_cache, without_cache)
    print(f"model lm:dim={args.dim},layers={args.layers} mixers {args.mixers}, context {args.context}, "
          f"{args.new_tokens} new tokens, {torch.get_num_threads()} threads")
    print(f"with the cache (one step per token):     {cached:8.2f} tokens/s")
    print(f"without it (a forward over the prefix):  {uncached:8.2f} tokens/s")
    print(f"ratio {cached / uncached:.1f}x; same tokens: {same}")


if __name__ == "__main__":
    main()
