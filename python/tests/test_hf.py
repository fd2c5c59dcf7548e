"""seqmix's language models in Hugging Face transformers (seqmix.hf): a model saved with save_pretrained loads with
AutoModelForCausalLM.from_pretrained in a fresh process with equal logits; a `seqmix train` text run exports
(`python -m seqmix export-hf`) to a folder that AutoModelForCausalLM, AutoTokenizer and pipeline load, whose greedy
generate equals `seqmix generate` and costs one seqmix step per new token; beam search through the cache equals beam
search without it; Trainer lowers the loss; lm-evaluation-harness scores the exported model on a local task."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

import seqmix
import seqmix.hf
from test_modules import run_cli
from transformers import (AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments, pipeline)

PYTHON = sys.executable
CORPUS = "".join(f"line {i % 7} of a tiny corpus, said the {['cat', 'dog', 'owl'][i % 3]}.\n" for i in range(400))


def offline_environment(home):
    """A child process's environment: no network, transformers' caches in a scratch folder."""
    return dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=home, TRANSFORMERS_VERBOSITY="error",
                TOKENIZERS_PARALLELISM="false")


class HuggingFace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.folder = tempfile.TemporaryDirectory()
        corpus = os.path.join(cls.folder.name, "corpus.txt")
        with open(corpus, "w") as f:
            f.write(CORPUS)
        cls.run_dir = os.path.join(cls.folder.name, "run")
        run_cli("train", "--task", f"text:path={corpus},seq_len=32,vocab_size=300,num_test=4", "--mixer",
                "fem:prior=gla", "--mixer", "softmax:heads=2", "--steps", "30", "--batch-size", "8", "--eval-every",
                "30", "--threads", "1", "--out", cls.run_dir)
        cls.exported = os.path.join(cls.folder.name, "hf")
        done = subprocess.run([PYTHON, "-m", "seqmix", "export-hf", cls.run_dir, cls.exported], capture_output=True,
                              text=True, env=offline_environment(os.path.join(cls.folder.name, "home")))
        if done.returncode != 0:
            raise AssertionError(f"export-hf failed: {done.stderr}")
        cls.export_message = done.stdout

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def home(self):
        return os.path.join(self.folder.name, "home")

    def test_save_pretrained_loads_in_a_fresh_process_with_equal_logits(self):
        torch.manual_seed(0)
        config = seqmix.hf.SeqmixConfig(model_spec="lm:dim=32,layers=2,pos=learned", mixers=["gla:heads=2", "softmax"],
                                        vocab_size=50, seq_len=16)
        model = seqmix.hf.SeqmixForCausalLM(config).eval()
        tokens = torch.randint(0, 50, (2, 16))
        with torch.no_grad():
            want = model(tokens, use_cache=False).logits
        with tempfile.TemporaryDirectory() as folder:
            model.save_pretrained(folder)
            self.assertTrue(os.path.exists(os.path.join(folder, "model.safetensors")))
            torch.save(tokens, os.path.join(folder, "tokens.pt"))
            script = ("import sys, torch, seqmix.hf\n"
                      "from transformers import AutoModelForCausalLM\n"
                      "m = AutoModelForCausalLM.from_pretrained(sys.argv[1]).eval()\n"
                      "assert type(m).__name__ == 'SeqmixForCausalLM', type(m)\n"
                      "tokens = torch.load(sys.argv[1] + '/tokens.pt')\n"
                      "with torch.no_grad():\n"
                      "    torch.save(m(tokens, use_cache=False).logits, sys.argv[1] + '/logits.pt')\n")
            done = subprocess.run([PYTHON, "-c", script, folder], capture_output=True, text=True,
                                  env=offline_environment(self.home()))
            self.assertEqual(done.returncode, 0, done.stderr)
            torch.testing.assert_close(torch.load(os.path.join(folder, "logits.pt")), want, atol=0, rtol=0)

    def test_the_exported_folder_loads_with_remote_code_and_the_tokenizer_has_seqmix_ids(self):
        self.assertIn("prefix_token_id=", self.export_message)
        with open(os.path.join(self.exported, "config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["model_type"], "seqmix")
        self.assertEqual(config["auto_map"]["AutoModelForCausalLM"], "modeling_seqmix.SeqmixForCausalLM")
        # A fresh process that does not import seqmix: trust_remote_code finds the classes through the folder's code.
        script = ("import sys\n"
                  "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
                  "m = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True)\n"
                  "t = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)\n"
                  "print(type(m).__name__, type(t).__name__)\n")
        done = subprocess.run([PYTHON, "-c", script, self.exported], capture_output=True, text=True,
                              env=offline_environment(self.home()))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.split(), ["SeqmixForCausalLM", "SeqmixTokenizer"])
        tokenizer = AutoTokenizer.from_pretrained(self.exported)
        run = seqmix.load_run(self.run_dir)
        for text in ("said the owl", "line 3 of a\ntiny corpus,\n\n said", "a \u2581 stays"):
            ids = tokenizer(text).input_ids
            self.assertEqual(ids, run.tokenizer.encode(text), repr(text))
            self.assertEqual(tokenizer.decode(ids), run.tokenizer.decode(ids), repr(text))

    def test_greedy_generate_equals_seqmix_generate_and_costs_one_step_per_token(self):
        model = AutoModelForCausalLM.from_pretrained(self.exported).eval()
        tokenizer = AutoTokenizer.from_pretrained(self.exported)
        prompt = tokenizer("said the", return_tensors="pt").input_ids
        calls = {"step": 0, "prefill": 0}
        seqmix_model = model.model
        for name in calls:
            method = getattr(seqmix_model, name)

            def counted(*args, name=name, method=method):
                calls[name] += 1
                return method(*args)
            setattr(seqmix_model, name, counted)
        new_tokens = 12
        out = model.generate(prompt, max_new_tokens=new_tokens, do_sample=False)
        self.assertEqual(calls, {"prefill": 1, "step": new_tokens - 1})  # the prompt once, then a step per token
        theirs = run_cli("generate", "--run", self.run_dir, "--prompt", "said the", "--tokens", str(new_tokens),
                         "--temperature", "0", "--threads", "1")
        self.assertEqual(tokenizer.decode(out[0]) + "\n", theirs)
        # Without the cache: a forward over the whole prefix per token, the same tokens.
        calls.update(step=0, prefill=0)
        uncached = model.generate(prompt, max_new_tokens=new_tokens, do_sample=False, use_cache=False)
        self.assertEqual(calls, {"prefill": 0, "step": 0})
        self.assertTrue(torch.equal(uncached, out))
        # The pipeline reads the same.
        generator = pipeline("text-generation", model=self.exported)
        text = generator("said the", max_new_tokens=new_tokens, do_sample=False)[0]["generated_text"]
        self.assertEqual(text + "\n", theirs)

    def test_beam_search_and_sampling_through_the_cache(self):
        model = AutoModelForCausalLM.from_pretrained(self.exported).eval()
        tokenizer = AutoTokenizer.from_pretrained(self.exported)
        one = tokenizer("said the", return_tensors="pt").input_ids
        prompt = torch.cat([one, one.flip(1)], 0)  # two rows of one length
        beams = model.generate(prompt, max_new_tokens=8, num_beams=3, do_sample=False, num_return_sequences=2)
        uncached = model.generate(prompt, max_new_tokens=8, num_beams=3, do_sample=False, num_return_sequences=2,
                                  use_cache=False)
        self.assertTrue(torch.equal(beams, uncached))
        torch.manual_seed(1)
        sampled = model.generate(prompt, max_new_tokens=8, do_sample=True, top_k=5)
        torch.manual_seed(1)
        sampled_uncached = model.generate(prompt, max_new_tokens=8, do_sample=True, top_k=5, use_cache=False)
        self.assertTrue(torch.equal(sampled, sampled_uncached))

    def test_bad_inputs_are_clear_errors(self):
        model = AutoModelForCausalLM.from_pretrained(self.exported).eval()
        ids = torch.tensor([[5, 6, 7]])
        with self.assertRaisesRegex(ValueError, "pads on the left"):
            model(ids, attention_mask=torch.tensor([[0, 1, 1]]), use_cache=False)
        with self.assertRaisesRegex(ValueError, "generate reads no padding"):
            model.generate(ids, attention_mask=torch.tensor([[1, 1, 0]]), max_new_tokens=2)
        with self.assertRaisesRegex(ValueError, "inputs_embeds"):
            model(inputs_embeds=torch.zeros(1, 3, 8))
        right_padded = model(ids, attention_mask=torch.tensor([[1, 1, 0]]), use_cache=False).logits
        torch.testing.assert_close(right_padded[:, :2], model(ids[:, :2], use_cache=False).logits, atol=0, rtol=0)
        done = subprocess.run([PYTHON, "-m", "seqmix", "export-hf", self.run_dir, self.exported], capture_output=True,
                              text=True, env=offline_environment(self.home()))
        self.assertEqual(done.returncode, 1)
        self.assertIn("exists and is not an empty folder", done.stderr)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
        with self.assertRaisesRegex(ValueError, "model_spec must be an lm spec"):
            seqmix.hf.SeqmixConfig(model_spec="probe:dim=8")

    def test_trainer_lowers_the_loss(self):
        torch.manual_seed(0)
        model = seqmix.hf.SeqmixForCausalLM(seqmix.hf.SeqmixConfig(
            model_spec="lm:dim=32,layers=2", mixers=["fem:prior=gla", "softmax:heads=2"], vocab_size=16))
        rows = [{"input_ids": ids, "labels": ids} for ids in
                (torch.arange(i, i + 24) % 16 for i in range(64))]  # counting modulo 16
        with tempfile.TemporaryDirectory() as out:
            arguments = TrainingArguments(output_dir=out, max_steps=40, per_device_train_batch_size=8,
                                          learning_rate=3e-3, logging_steps=1, report_to=[], use_cpu=True,
                                          save_strategy="no", dataloader_num_workers=0, disable_tqdm=True)
            trainer = Trainer(model=model, args=arguments, train_dataset=rows)
            trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        self.assertGreaterEqual(len(losses), 30)
        self.assertLess(sum(losses[-5:]) / 5, 0.5 * sum(losses[:5]) / 5)

    def test_lm_evaluation_harness_scores_the_exported_model(self):
        task = os.path.join(self.folder.name, "task")
        os.makedirs(task, exist_ok=True)
        rows = [{"context": "said the", "choices": ["cat.", "corpus,"], "label": 1},
                {"context": "line 3 of a tiny", "choices": ["corpus,", "dog."], "label": 0},
                {"context": "of a tiny", "choices": ["owl", "corpus,"], "label": 1}]
        with open(os.path.join(task, "data.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        with open(os.path.join(task, "seqmix_local.yaml"), "w") as f:
            f.write("task: seqmix_local\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
                    f"    test: {os.path.join(task, 'data.jsonl')}\n"
                    "test_split: test\noutput_type: multiple_choice\ndoc_to_text: \"{{context}}\"\n"
                    "doc_to_choice: \"{{choices}}\"\ndoc_to_target: \"{{label}}\"\n"
                    "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n")
        prefix = self.export_message.split("prefix_token_id=")[1].split()[0].rstrip(")")
        results = os.path.join(self.folder.name, "lm_eval")
        done = subprocess.run([os.path.join(os.path.dirname(PYTHON), "lm_eval"), "--model", "hf", "--model_args",
                               f"pretrained={self.exported},trust_remote_code=True,prefix_token_id={prefix}",
                               "--tasks", "seqmix_local", "--include_path", task, "--device", "cpu", "--batch_size",
                               "2", "--output_path", results], capture_output=True, text=True,
                              env=offline_environment(self.home()))
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        self.assertRegex(done.stdout, r"seqmix_local\s*\|.*\|acc\s*\|")
        # The harness's accuracy is the model's: the continuation (after the harness's target delimiter, a space)
        # with the higher log-likelihood, computed here.
        model = AutoModelForCausalLM.from_pretrained(self.exported).eval()
        tokenizer = AutoTokenizer.from_pretrained(self.exported)
        right = 0
        for row in rows:
            scores = []
            for choice in row["choices"]:
                context = tokenizer(row["context"]).input_ids
                whole = tokenizer(row["context"] + " " + choice).input_ids
                with torch.no_grad():
                    logp = model(torch.tensor([whole]), use_cache=False).logits.log_softmax(-1)[0]
                scores.append(sum(logp[i - 1, whole[i]].item() for i in range(len(context), len(whole))))
            right += int(max(range(2), key=lambda i: scores[i]) == row["label"])
        found = [json.load(open(os.path.join(dirpath, name))) for dirpath, _, names in os.walk(results)
                 for name in names if name.endswith(".json")]
        self.assertEqual(len(found), 1, found)
        self.assertAlmostEqual(found[0]["results"]["seqmix_local"]["acc,none"], right / len(rows))


if __name__ == "__main__":
    unittest.main()
