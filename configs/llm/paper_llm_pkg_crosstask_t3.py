# The paper's LLM + PKG row on CrossTask T=3 (Qwen3-30B + PKG): its printed prompt with the PKG
# (prompts/paper/sequence_completion_pkg.txt), the PKG counted on the training windows,
# oracle first/last actions; e.g. served by `vllm serve Qwen/Qwen3-30B-A3B --port 8000`.
#   .venv/bin/python tools/test.py configs/llm/paper_llm_pkg_crosstask_t3.py
_base_ = ['./paper_llm_crosstask_t3.py']
model = dict(with_pkg=True, backend=dict(model='Qwen/Qwen3-30B-A3B'))
