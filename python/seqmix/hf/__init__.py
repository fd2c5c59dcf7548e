"""seqmix's language models in Hugging Face transformers (`pip install seqmix[hf]`).

    import seqmix.hf                                   # registers model_type "seqmix" with the Auto classes
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
    seqmix.hf.export_run("runs/shakespeare", "hf/shakespeare")        # or: python -m seqmix export-hf RUN OUT
    model = AutoModelForCausalLM.from_pretrained("hf/shakespeare")
    tokenizer = AutoTokenizer.from_pretrained("hf/shakespeare")
    ids = tokenizer("ROMEO:", return_tensors="pt").input_ids
    print(tokenizer.decode(model.generate(ids, max_new_tokens=50, do_sample=False)[0]))

SeqmixConfig (configuration.py), SeqmixForCausalLM and SeqmixCache (modeling.py: generate decodes one seqmix step
per new token), SeqmixTokenizer (tokenization.py), export_run (export.py). docs/python.md, "Hugging Face
transformers", says more.
"""
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from .configuration import SeqmixConfig
from .export import export_run
from .modeling import SeqmixCache, SeqmixForCausalLM, SeqmixPreTrainedModel
from .tokenization import SeqmixTokenizer

__all__ = ["SeqmixConfig", "SeqmixForCausalLM", "SeqmixPreTrainedModel", "SeqmixCache", "SeqmixTokenizer",
           "export_run"]

AutoConfig.register("seqmix", SeqmixConfig, exist_ok=True)
AutoModelForCausalLM.register(SeqmixConfig, SeqmixForCausalLM, exist_ok=True)
AutoTokenizer.register(SeqmixConfig, slow_tokenizer_class=SeqmixTokenizer, exist_ok=True)
