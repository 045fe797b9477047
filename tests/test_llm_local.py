"""The local transformers chat backend, on a tiny randomly initialised GPT-2 written by the test
(no chat model weights are available offline: this checks the plumbing, not the answers)."""
import pytest

from test_llm_prompting import TRAIN_PLANS, TRAIN_TASKS, make_taxonomy, query
from vpn_plugin.baselines.llm.backends import TransformersChatBackend
from vpn_plugin.baselines.llm.planner import PromptPlanner
from vpn_plugin.baselines.llm.prompting import PromptBuilder

WORDS = ['<unk>', '<eos>', 'user', 'assistant', ':', '{', '}', '[', ']', ','] + list('0123456789')


def write_tiny_chat_model(folder):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token='<unk>'))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token='<unk>',
                                   eos_token='<eos>', pad_token='<eos>')
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} "
                          "{% endfor %}assistant :")
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(WORDS), n_positions=2048, n_embd=16, n_layer=1, n_head=2,
                        bos_token_id=1, eos_token_id=1)
    GPT2LMHeadModel(config).save_pretrained(folder)


def test_transformers_backend_generates_counts_tokens_and_caches(tmp_path):
    write_tiny_chat_model(tmp_path / 'model')
    backend = TransformersChatBackend(str(tmp_path / 'model'), params={'max_tokens': 4},
                                      cache_dir=tmp_path / 'cache')
    reply = backend.complete([{'role': 'user', 'content': '1 2 3'}])
    assert isinstance(reply.text, str) and not reply.cached
    assert reply.prompt_tokens == len('user : 1 2 3 assistant :'.split())
    assert 1 <= reply.completion_tokens <= 4
    again = backend.complete([{'role': 'user', 'content': '1 2 3'}])
    if reply.completion_tokens == 4:  # cut at max_tokens (the random model never ends):
        assert reply.truncated and not again.cached  # truncated, never cached (pass15 T1)
    else:
        assert again.cached and again.text == reply.text
    assert backend.usage.counts['requests'] == 1 + (not again.cached)
    # a random model's reply is judged like any other: here it cannot be a valid plan
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS)
    outcome = PromptPlanner(backend, builder).plan(query())
    assert outcome.status in ('unparseable', 'out_of_taxonomy', 'truncated')
    with pytest.raises(ValueError, match='text-only'):
        backend.complete([{'role': 'user', 'content': [{'type': 'text', 'text': 'x'}]}])
