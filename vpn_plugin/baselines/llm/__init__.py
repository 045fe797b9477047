"""LLM and VLM prompting baselines through any OpenAI-compatible endpoint.

``PromptPlanner`` completes a plan from its first/last actions (LLM) or from the start/goal
clips (VLM); ``LLMPlanner`` (MODELS, a ``BasePlanner``) wraps it: ``tools/test.py`` runs it
from ``configs/llm/*``, ``tools/llm_eval.py`` is a command line over the same model.
Templates are the files in ``prompts/``.
"""
from .anchors import ORACLE, load_anchor_predictions, save_anchor_predictions
from .backends import (ChatReply, OpenAIChatBackend, RequestFailedError, ResponseCache,
                       TransformersChatBackend, build_backend)
from .evaluate import (attach_frames, build_queries, failure_causes, failure_counts, make_query,
                       run_planner, stratified_sample, summarize, token_summary)
from .model import LLMPlanner
from .planner import STATUSES, PlanOutcome, PromptPlanner
from .prompting import PlanningQuery, PromptBuilder

__all__ = ['ORACLE', 'load_anchor_predictions', 'save_anchor_predictions',
           'ChatReply', 'OpenAIChatBackend', 'RequestFailedError', 'ResponseCache',
           'TransformersChatBackend', 'build_backend', 'attach_frames', 'build_queries',
           'failure_causes', 'failure_counts', 'make_query', 'stratified_sample',
           'run_planner', 'summarize', 'token_summary', 'LLMPlanner', 'STATUSES',
           'PlanOutcome', 'PromptPlanner', 'PlanningQuery', 'PromptBuilder']
