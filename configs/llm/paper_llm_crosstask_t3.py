# The paper's LLM rows on CrossTask T=3 (Qwen2.5-32B, Gemini 2.5 Pro, Qwen3-30B): its printed
# prompt (prompts/paper/sequence_completion.txt; our serialisation of its placeholders in
# prompts/paper/README.md), oracle first/last actions. Evaluate without a checkpoint:
#   .venv/bin/python tools/test.py configs/llm/paper_llm_crosstask_t3.py
# Model: served by any OpenAI-compatible endpoint, e.g. vLLM
#   vllm serve Qwen/Qwen2.5-32B-Instruct --port 8000        (the paper names "Qwen2.5-32B")
# Other rows: --cfg-options model.backend.model=Qwen/Qwen3-30B-A3B, or Gemini 2.5 Pro through
# Google's endpoint: model.backend.base_url=https://generativelanguage.googleapis.com/v1beta/openai/
# model.backend.model=gemini-2.5-pro model.backend.api_key_env=GEMINI_API_KEY.
# A step model's first/last actions instead of the oracle's: tools/llm_eval.py --prompt-set paper.
_base_ = ['./llm_crosstask_t3.py']
model = dict(
    with_pkg=False,
    prompt_set='paper',
    backend=dict(base_url='http://localhost:8000/v1', model='Qwen/Qwen2.5-32B-Instruct',
                 api_key_env=None))  # a local server: any key
