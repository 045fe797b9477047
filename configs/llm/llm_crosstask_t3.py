# An LLM completes each CrossTask T=3 plan from its first and last actions (oracle anchors
# by default), with the PKG in the prompt. Evaluate without a checkpoint:
#   OPENAI_API_KEY=... .venv/bin/python tools/test.py configs/llm/llm_crosstask_t3.py
# Any OpenAI-compatible server works (vLLM, Ollama, Gemini's endpoint): change base_url/model.
# Our prompts (prompts/*.txt), a named alternative to the paper's: the configs that reproduce
# the paper's LLM rows are paper_llm_crosstask_t3.py and paper_llm_pkg_crosstask_t3.py.
_base_ = ['../_base_/datasets/crosstask.py', '../_base_/default_runtime.py']
model = dict(
    type='LLMPlanner',
    train_dataset={{_base_.train_dataloader.dataset}},
    with_pkg=True,
    prompt_set='ours',
    # the PKG of the prompt, counted on the training windows when the model is built
    pkg=dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
             extra_datasets=[], perturbations=[], seed=0),
    backend=dict(type='openai', base_url='https://api.openai.com/v1', model='gpt-4o-mini',
                 api_key_env='OPENAI_API_KEY', cache_dir='work_dirs/llm_cache'))
test_cfg = dict(type='TestLoop')
# Nothing to train: the training split only feeds the prompts (examples, PKG, taxonomy).
train_dataloader = None
val_dataloader = None
val_evaluator = None
