"""KEPP (Nagasinghe et al., CVPR 2024, "Why Not Use Your Textbook?"; github
Ravindu-Yasas-Nagasinghe/KEPP): PDPP's projected diffusion conditioned on paths of a
procedure-knowledge graph (docs/kepp.md).

* ``KEPPDiffusion``: one of KEPP's two diffusion models on the temporal U-Net, the cosine
  schedule and the samplers of ``core.diffusion``; x = [condition block (K) | actions (N) |
  observations (D)] per step, no task anywhere.
  - the **step model** (K = 0): the middle steps are zero in x0 and zeroed by the projection,
    the loss weighs the first/last action dims x10 and the middle ones x0; it predicts the
    first and last actions. Trained FIRST, alone, and reused (``KEPPStepModelHook``,
    ``vpn_plugin/engine/kepp_training.py``), never retrained silently.
  - the **plan model** (K = 2N): the PKG block and the "LLM" block (an exact copy, as the
    official data loader feeds it), both written over by the projection; loss x5 on the
    first/last action dims.
* ``KEPP`` (MODELS): a ``BasePlanner``: step model (DDIM) -> first/last action -> two PKG
  paths (``core.kepp_paths``, cached per pair) -> plan model (DDIM, or DDPM as the official
  validation) -> argmax of the action dims. Training conditions the plan model on the paths
  of the step model's predictions on the training windows (official), or of the ground truth
  (``train_paths='truth'``).

The PKG is KEPP's own graph, counted on the run's training videos (``build_pkg``).
``released_graph`` loads one of KEPP's released graph files instead (safe unpickler): the
released NIV graph was built on train + test videos, so such a run is marked "test-set PKG".
The paper counts the plan U-Net (42,184,335 at CrossTask N=133, D=1536); the step U-Net
(41,843,589) is ``counted_apart`` and logged beside it.
Shapes: B batch, T horizon, N actions, D observation dim.
"""
import os
from typing import Annotated, Dict, Literal, Optional, Sequence

from vpn_plugin.config_types import Count, NonNegative, Text, Range, Seed, checked_arguments
import numpy as np
import torch
from mmengine.logging import print_log

from mmaction.registry import MODELS

from ..core import diffusion, kepp_paths
from ..core.pkg import check_pkg, pkg_row_tolerance
from ..datasets.safe_pickle import safe_load_digraph
from ..errors import check_choice, check_file, check_number
from .base_planner import ActionCount, Horizon, BasePlanner, num_parameters
from .pdpp import SEED_STRIDE
from .temporal_unet import GROUPS, MAX_DIM, MAX_FEATURE_DIM, DiffusionModel, TemporalUNet

SAMPLERS = ('ddim', 'ddpm')
DiffusionSteps = Annotated[int, Range(1, diffusion.MAX_DIFFUSION_STEPS)]
TRAIN_PATHS = ('step', 'truth')
TEST_SET_PKG = 'test-set PKG'


def released_graph_note(path) -> str:
    """What a graph read from a file (``model.released_graph``) is, as far as the run knows: the
    log's warning and the metrics record (``tools/test.py``) say this one text. The run did not
    count it and cannot tell which videos the file was counted on: it is marked test-set PKG
    because KEPP's released graphs hold test videos (a user's file may not: "not built from
    this run's training videos" was said of the run's own training graph)."""
    return (f'{TEST_SET_PKG}: the graph was read from model.released_graph={str(path)!r}, not '
            'counted by this run, so it is marked not comparable to the main table (KEPP\'s '
            'released graphs hold test videos; which videos this file was counted on, the run '
            'cannot tell)')
RELEASED_GRAPH_HORIZON = 4  # the official retrieval (validate_graph_final) and data lists
# the released graph files (nodes, edges) -> (dataset, the action count its ids belong to)
RELEASED_GRAPHS = {(105, 755): ('CrossTask (105 actions)', 105), (718, 2226): ('COIN', 778),
                   (48, 175): ('NIV (built on train + test)', 48)}


class KEPPDiffusion(DiffusionModel):
    """One KEPP diffusion model (module docstring).

    Args:
        feature_dim: D. num_actions: N. horizon: T (>= len(dim_mults)).
        condition_dim: K, the width of the per-step condition block (plan 2N, step 0).
        dim, dim_mults: the U-Net's widths. n_timesteps: diffusion steps n.
        endpoint_weight, middle_weight: loss weights of the action dims (plan 5 / 1, step 10 / 0).
        zero_middle: the step model's x0 and projection (middle steps all zero).
        stream: which per-window noise stream the model draws from (plan 0, step 1).
    """

    def __init__(self, feature_dim: int, num_actions: int, horizon: int, condition_dim: int,
                 dim: int, dim_mults, n_timesteps: int, endpoint_weight: float,
                 middle_weight: float, zero_middle: bool, sampling_seed: int, stream: int):
        super().__init__()
        self.check_horizon('KEPP', horizon, dim_mults)
        self.check_inputs('KEPP', feature_dim, sampling_seed)
        self.feature_dim, self.num_actions, self.horizon = feature_dim, num_actions, horizon
        self.condition_dim = condition_dim
        self.endpoint_weight, self.middle_weight = endpoint_weight, middle_weight
        self.zero_middle, self.sampling_seed, self.stream = zero_middle, sampling_seed, stream
        self.unet = TemporalUNet(condition_dim + num_actions + feature_dim, dim, tuple(dim_mults))
        self.register_schedule(n_timesteps, 'model.n_timesteps' if stream == 0
                               else 'model.step_n_timesteps')

    @property
    def channels(self) -> int:
        return self.condition_dim + self.num_actions + self.feature_dim

    def empty_block(self, inputs) -> torch.Tensor:
        """(B, 0): the step model's (absent) condition block."""
        return inputs['start'].new_zeros(inputs['start'].shape[0], 0)

    def project(self, x, block, inputs) -> torch.Tensor:
        return diffusion.project_conditions(x, block, inputs['start'], inputs['goal'],
                                            self.zero_middle)

    def target(self, plan: torch.Tensor, block, inputs) -> torch.Tensor:
        """x0 (B, T, C) of plans (B, T) with the condition block (B, T, K)."""
        return diffusion.plan_tensor(plan, block, inputs['start'], inputs['goal'],
                                     self.num_actions, middle_actions=not self.zero_middle)

    def weighted_mse(self, pred, target) -> torch.Tensor:
        return diffusion.weighted_mse(pred, target, self.condition_dim, self.num_actions,
                                      self.endpoint_weight, self.middle_weight)

    def training_terms(self, x0, t, noise, block, inputs) -> Dict[str, torch.Tensor]:
        """Official ``p_losses`` with given timesteps t (B,) and noise (B, T, C)."""
        x_q_sample = diffusion.q_sample(x0, t, noise, self.schedule())
        x_noisy = self.project(x_q_sample, block, inputs)
        x_recon_raw = self.unet(x_noisy, t)
        x_recon = self.project(x_recon_raw, block, inputs)
        return dict(x_q_sample=x_q_sample, x_noisy=x_noisy, x_recon_raw=x_recon_raw,
                    x_recon=x_recon, loss=self.weighted_mse(x_recon, x0))

    def loss(self, plan, block, inputs) -> torch.Tensor:
        """The diffusion loss at uniform random timesteps."""
        x0 = self.target(plan, block, inputs)
        t = torch.randint(0, len(self.betas), (x0.shape[0],), device=x0.device)
        return self.training_terms(x0, t, torch.randn_like(x0), block, inputs)['loss']

    def generators(self, batch: int, data_samples) -> Optional[list]:
        """One generator per window (seeded by its index, so a window's draws do not depend
        on the batch); None without indices (the global stream, as the official code)."""
        indices = (data_samples or {}).get('index')
        if indices is None:
            return None
        return [torch.Generator().manual_seed(
            (self.sampling_seed * SEED_STRIDE + int(i)) * 2 + self.stream) for i in indices]

    def draw(self, generators, batch: int, device) -> torch.Tensor:
        shape = (self.horizon, self.channels)
        if generators is None:
            return torch.randn((batch, *shape), device=device)
        return torch.stack([torch.randn(shape, generator=g) for g in generators]).to(device)

    def sample(self, block, inputs, data_samples=None, sampler: str = 'ddim', x_t=None,
               noise=None, trace: bool = False):
        """(x0 (B, T, C), states, raw U-Net outputs): DDIM (10 steps, eta 0) or DDPM (n steps)
        from x_T (drawn per window unless given); ``noise(k)``: the DDPM draws."""
        start = inputs['start']
        generators = self.generators(start.shape[0], data_samples)
        if x_t is None:
            x_t = self.draw(generators, start.shape[0], start.device)
        project = lambda x: self.project(x, block, inputs)  # noqa: E731
        if sampler == 'ddim':
            return diffusion.ddim_sample(self.unet, x_t, project, self.schedule(),
                                         self.ddim_timestep_seq, trace=trace)
        if noise is None:
            noise = lambda k: self.draw(generators, start.shape[0], start.device)  # noqa: E731
        return diffusion.ddpm_sample(self.unet, x_t, project, self.schedule(), noise, trace)

    def actions(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, N): the action dims of x (B, T, C)."""
        return x[..., self.condition_dim:self.condition_dim + self.num_actions]


def released_graph(path, num_actions: int, horizon: int) -> kepp_paths.KEPPGraph:
    """One of KEPP's released graph files (a pickled ``networkx.DiGraph``, read with the safe
    unpickler), checked against the run's action count and horizon."""
    path = check_file(path, 'model.released_graph',
                      missing=f'model.released_graph={str(path)!r}: no such file')
    nodes, successors = safe_load_digraph(path)
    edges = sum(len(row) for row in successors.values())
    if edges == 0:
        raise ValueError(f'{path}: the graph has {len(nodes)} nodes and no edge; every '
                         'retrieval would fall back to [s, .., e]: expected a released KEPP graph '
                         '(a networkx.DiGraph with weighted edges)')
    known = RELEASED_GRAPHS.get((len(nodes), edges))
    if horizon != RELEASED_GRAPH_HORIZON:
        raise ValueError(f'{path}: a released KEPP graph is used with the official retrieval of '
                         f'T={RELEASED_GRAPH_HORIZON} paths (validate_graph_final and the '
                         f'released data lists), but this run has horizon={horizon}; drop '
                         'model.released_graph (the default graph is built from the training '
                         'videos at any horizon)')
    if known and known[1] != num_actions:
        raise ValueError(f'{path}: the released {known[0]} graph ({len(nodes)} nodes, {edges} '
                         f'edges) has ids of {known[1]} actions, the model num_actions='
                         f'{num_actions}; use it with its dataset')
    graph = kepp_paths.KEPPGraph(nodes, _checked_edges(path, nodes, successors),
                                 weights_dtype=_weights_dtype(successors))
    graph.check_actions(num_actions, source=str(path))
    # the PKG rule the model installs it with, said of this file (the bare "pkg row 0" named
    # neither the file nor that a row is an action's out-weights), at the precision its
    # weights were stored in (float16 weights' rows miss 1 by float16 rounding)
    check_pkg(graph.to_arrays(num_actions)[0].astype(graph.weights_dtype),
              f'{path} (model.released_graph): the PKG of its edge weights (row = the action '
              'an edge leaves),')
    return graph


def check_kepp_graph_options(builder, released) -> None:
    """``ValueError`` for a ``model.pkg`` option KEPP's graph would ignore: KEPP normalises
    raw per-video counts (no smoothing) over the pooled videos of every source (no 'mean'
    union), and a released graph file is read as it is (no sequence perturbation, no extra
    dataset, no smoothing)."""
    if builder.smoothing:
        raise ValueError(f'KEPP: model.pkg.smoothing={builder.smoothing!r}; KEPP\'s graph '
                         'normalises the raw counts of consecutive pairs (official '
                         'graph_creation.py), so smoothing would be ignored: expected 0')
    if builder.union == 'mean' and builder.extra_datasets:
        raise ValueError("KEPP: model.pkg.union='mean' with extra_datasets; KEPP's graph counts "
                         "the videos of every source together ('pool'), so 'mean' would be "
                         "ignored: use union='pool'")
    ignored = [name for name, value in (('perturbations', builder.perturbations),
                                        ('extra_datasets', builder.extra_datasets)) if value]
    if released and ignored:
        raise ValueError(f'KEPP: model.released_graph={released!r} with model.pkg.'
                         f'{" and ".join(ignored)}: the released graph file is used as it is, '
                         'so they would be ignored; drop one or the other')


def check_graph_taxonomy(graph: kepp_paths.KEPPGraph, taxonomy, path) -> None:
    """KEPP's graph joins consecutive steps of one video, so actions of one task: an edge
    between two tasks of the run's taxonomy means a graph of another taxonomy (or another
    action numbering), whose ids would silently name other actions: ``ValueError``."""
    across = [(u, v) for u, v, _ in graph.edges()
              if taxonomy.action_task[u] != taxonomy.action_task[v]]
    if across:
        u, v = across[0]
        names = [f'{a} ({taxonomy.action_names[a]!r} of task '
                 f'{taxonomy.task_names[taxonomy.action_task[a]]!r})' for a in (u, v)]
        raise ValueError(f'{path}: {len(across)} of its {graph.num_edges} edges join actions of '
                         f'two tasks of the taxonomy {taxonomy.path}, e.g. {names[0]} -> '
                         f'{names[1]}; a KEPP graph joins steps of one video: this graph was '
                         'built on another taxonomy (or action numbering); use the graph of '
                         'this dataset')


def check_saved_graph(state_dict, prefix: str, counted: bool) -> None:
    """A checkpoint's graph buffers agree with each other: an edge (a successor rank) has a
    weight in (0, 1] (a released graph file's edges in [0, 1], as :func:`released_graph`
    reads them: an edge of weight 0 is still an edge there) and a non-edge none, and a graph
    counted on training videos has each node's out-weights summing to 1 (released graphs are
    used as they are). An edited or damaged graph would change every retrieved path without
    a word."""
    weights, successors = (state_dict.get(prefix + name) for name in
                           ('graph_weights', 'graph_successor_rank'))
    if weights is None or successors is None or weights.shape != successors.shape:
        raise ValueError('KEPP: the checkpoint holds graph_node_rank but no graph_weights / '
                         'graph_successor_rank of one shape: a damaged checkpoint')
    edges = successors >= 0
    lowest_ok = (weights > 0) if counted else (weights >= 0)
    bad = (edges & ~(lowest_ok & (weights <= 1))) | (~edges & (weights != 0))
    # rows summed in float64 and judged at the precision the weights are stored in (a
    # checkpoint converted to float16 rounds each weight: its rows miss 1 by that rounding)
    rows = edges.any(1)
    sums = weights.double().sum(1)[rows]
    allowed = torch.as_tensor(pkg_row_tolerance(weights.dtype, edges.sum(1)[rows].numpy()))
    off = (sums - 1).abs() > allowed
    if bool(bad.any()) or (counted and bool(off.any())):
        u, v = (bad.nonzero()[0].tolist() if bool(bad.any()) else
                (int(rows.nonzero()[((sums - 1).abs() / allowed).argmax()]), None))
        where = (f'edge ({u}, {v}) has weight {float(weights[u, v])!r} '
                 f'({"an edge" if bool(edges[u, v]) else "no edge"} by graph_successor_rank)'
                 if v is not None else f'the out-weights of node {u} sum to '
                 f'{float(weights[u].sum())!r}, not 1')
        raise ValueError(f'KEPP: the checkpoint\'s graph is inconsistent: {where}; an edited or '
                         'damaged checkpoint (its plan model was trained on the paths of its '
                         'own graph): use the checkpoint as the run saved it')


def _weights_dtype(successors) -> np.dtype:
    """The coarsest float dtype a graph file's edge weights are stored in (float64 for Python
    floats; numpy floats keep theirs)."""
    dtypes = {np.dtype(type(attributes.get('weight'))) for row in successors.values()
              for _, attributes in row if isinstance(attributes.get('weight'), np.floating)}
    return max(dtypes | {np.dtype(np.float64)}, key=lambda dtype: np.finfo(dtype).eps)


def _checked_edges(path, nodes, successors) -> dict:
    """``{u: [(v, weight), ...]}`` of a graph file, its values checked, never coerced: node
    ids are integers (``True`` is not action 1), every successor is a node, every edge has a
    ``weight`` attribute that is a float in [0, 1] (a count, ``1``, is not a probability)."""
    from ..datasets.validation import as_int
    for node in nodes:
        as_int(node, f'{path}: node {node!r}: the action id')
    known, edges = set(nodes), {}
    for u, row in successors.items():
        edges[u] = []
        for v, attributes in row:
            where = f'{path}: edge ({u!r}, {v!r})'
            as_int(v, f'{where}: the successor\'s action id')
            if v not in known:
                raise ValueError(f'{where}: the successor is not a node of the graph (nodes: '
                                 f'{len(nodes)} action ids); expected edges between its nodes')
            if 'weight' not in attributes:
                raise ValueError(f'{where} has no "weight" attribute (attributes: '
                                 f'{sorted(attributes)}); expected the transition probability, '
                                 'a float in [0, 1]')
            weight = attributes['weight']
            if isinstance(weight, np.floating):  # a graph built from numpy arrays (float32)
                weight = float(weight)
            if not (isinstance(weight, float) and 0 <= weight <= 1):
                raise ValueError(f'{where} has weight {weight!r} ({type(weight).__name__}); '
                                 'expected a float in [0, 1] (the transition probability, '
                                 'not a count)')
            edges[u].append((v, weight))
    return edges


@MODELS.register_module()
class KEPP(BasePlanner):
    """KEPP as a planner (module docstring).

    Args:
        feature_dim: D. num_actions: N. horizon: T.
        dim, dim_mults: U-Net widths of both models (official 256, (1, 2, 4)).
        n_timesteps, step_n_timesteps: diffusion steps of the plan / step model (step: None =
            the plan's).
        plan_endpoint_weight (5), step_endpoint_weight (10): official loss weights.
        sampling_seed: per-window seed of x_T and of the DDPM draws.
        sampler: 'ddim' (official inference, the reported metrics) or 'ddpm' (official
            validation) for the plan model; the step model always uses DDIM (official).
        train_paths: 'step' (official: the PKG paths of the step model's predictions on the
            training windows) or 'truth' (of the ground-truth first/last actions).
        released_graph: path of a released KEPP graph file (``trained_graph.pkl``) to use
            instead of the graph of the training videos; marks the run "test-set PKG".
        step_checkpoint: a step model saved by ``KEPPStepModelHook`` to reuse.
    """

    counted_apart = ('step',)
    training_hooks = ('KEPPStepModelHook',)  # its first stage (runner.check_training_hooks)

    @staticmethod
    def resolved_options(options: dict) -> dict:
        """``options`` (a config's ``model``, defaults filled) with ``step_n_timesteps`` None
        resolved as ``__init__`` does (the plan's ``n_timesteps``): what a test compares with
        its training's (``engine.checkpoint.model_option_differences``)."""
        if options.get('step_n_timesteps') is None:
            return dict(options, step_n_timesteps=options.get('n_timesteps'))
        return options

    @checked_arguments(prefix='KEPP model.')
    def __init__(self, feature_dim: Annotated[int, Range(1, MAX_FEATURE_DIM)],
                 num_actions: ActionCount, horizon: Horizon,
                 dim: Annotated[int, Range(GROUPS, MAX_DIM)] = 256,
                 dim_mults: Sequence[Count] = (1, 2, 4),
                 n_timesteps: DiffusionSteps = 200,
                 step_n_timesteps: Optional[DiffusionSteps] = None,
                 plan_endpoint_weight: NonNegative = 5.0, step_endpoint_weight: NonNegative = 10.0,
                 sampling_seed: Seed = 0, sampler: Literal[SAMPLERS] = 'ddim',
                 train_paths: Literal[TRAIN_PATHS] = 'step', released_graph: Optional[Text] = None,
                 step_checkpoint: Optional[Text] = None, pkg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None):
        if pkg is not None and not isinstance(pkg, dict):
            raise ValueError(f'KEPP: model.pkg={pkg!r}; expected a dict of PKGBuilder options '
                             'or None')
        pkg = dict(pkg or {})
        if pkg.setdefault('count_mode', 'video') != 'video':
            raise ValueError(f"KEPP: model.pkg.count_mode={pkg['count_mode']!r}; KEPP's graph "
                             "counts the consecutive pairs of each training video: 'video'")
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        check_choice('model.sampler', sampler, SAMPLERS)
        check_choice('model.train_paths', train_paths, TRAIN_PATHS)
        check_number('model.n_timesteps', n_timesteps, integer=True, low=1,
                     high=diffusion.MAX_DIFFUSION_STEPS)
        # None: the plan model's; 0 is not "unset"
        check_number('model.step_n_timesteps', step_n_timesteps, integer=True, low=1,
                     high=diffusion.MAX_DIFFUSION_STEPS, optional=True)
        for name, weight in (('plan_endpoint_weight', plan_endpoint_weight),
                             ('step_endpoint_weight', step_endpoint_weight)):
            check_number(f'model.{name}', weight, low=0)
        if any(p.stage == 'graph' for p in self.pkg_builder.perturbations):
            raise ValueError('KEPP: model.pkg.perturbations may only change the training '
                             'sequences (DataFraction, LabelNoise): KEPP\'s graph keeps node '
                             'and successor order, which a graph perturbation does not define')
        check_kepp_graph_options(self.pkg_builder, released_graph)
        for name, path in (('released_graph', released_graph),
                           ('step_checkpoint', step_checkpoint)):
            if path is not None and not (isinstance(path, (str, os.PathLike)) and str(path)):
                raise ValueError(f'KEPP: model.{name}={path!r}; expected a file path or None '
                                 f'(no {name.replace("_", " ")})')
        self.sampler, self.train_paths = sampler, train_paths
        self.released_graph, self.step_checkpoint = released_graph, step_checkpoint
        common = dict(feature_dim=feature_dim, num_actions=num_actions, horizon=horizon,
                      dim=dim, dim_mults=dim_mults, sampling_seed=sampling_seed)
        self.plan = KEPPDiffusion(condition_dim=2 * num_actions, n_timesteps=n_timesteps,
                                  endpoint_weight=plan_endpoint_weight, middle_weight=1.0,
                                  zero_middle=False, stream=0, **common)
        step_n_timesteps = n_timesteps if step_n_timesteps is None else step_n_timesteps
        self.step = KEPPDiffusion(condition_dim=0, n_timesteps=step_n_timesteps,
                                  endpoint_weight=step_endpoint_weight, middle_weight=0.0,
                                  zero_middle=True, stream=1, **common)
        self.step.requires_grad_(False)  # trained before the plan model (KEPPStepModelHook)
        self.register_buffer('step_ready', torch.tensor(False))
        # the horizon both models were built and trained for (a checkpoint carries it)
        self.register_buffer('trained_horizon', torch.tensor(horizon))
        self.register_buffer('test_set_pkg', torch.tensor(False))
        self.register_buffer('graph_weights', torch.zeros(num_actions, num_actions,
                                                          dtype=torch.float64))
        self.register_buffer('graph_node_rank', torch.full((num_actions,), -1))
        self.register_buffer('graph_successor_rank', torch.full((num_actions, num_actions), -1))
        self.register_buffer('train_endpoints', torch.zeros(0, 2, dtype=torch.long),
                             persistent=False)
        self._retriever = None
        print_log(f'KEPP: plan U-Net {num_parameters(self):,} parameters, step U-Net '
                  f'{num_parameters(self.step):,} (counted apart; together '
                  f'{num_parameters(self.plan) + num_parameters(self.step):,}) '
                  f'(N={num_actions}, D={feature_dim}, T={horizon}, n={n_timesteps})',
                  logger='current')

    # ------------------------------------------------------------------ the PKG
    def build_pkg(self, dataset) -> np.ndarray:
        """KEPP's graph of the training videos (``core.kepp_paths.build_graph``) or, with
        ``released_graph``, the released file; installed and returned as (N, N)."""
        if self.released_graph:
            graph = released_graph(self.released_graph, self.num_actions, self.horizon)
            if dataset is not None:
                check_graph_taxonomy(graph, dataset.taxonomy, self.released_graph)
            source = f'{self.released_graph} (a graph file, not counted by this run: ' \
                     f'{TEST_SET_PKG})'
        else:
            if dataset.taxonomy.num_actions != self.num_actions:
                raise ValueError(f'KEPP: the training dataset has {dataset.taxonomy.num_actions}'
                                 f' actions, the model num_actions={self.num_actions}')
            sources = self.pkg_builder.sequence_sources(dataset, self.num_actions)
            videos = [sequence for source in sources for sequence in source]
            graph = kepp_paths.build_graph(enumerate(videos))
            source = f'{len(videos)} training videos ({self.pkg_builder.describe()})'
        self.set_graph(graph, test_set=bool(self.released_graph))
        print_log(f'KEPP: PKG with {len(graph.nodes)} nodes and {graph.num_edges} edges from '
                  f'{source}', logger='current')
        return self.graph_weights.numpy()

    def set_graph(self, graph: kepp_paths.KEPPGraph, test_set: bool = False) -> None:
        """Install an ordered KEPP graph (and its dense PKG for ``BasePlanner``)."""
        weights, node_rank, successor_rank = graph.to_arrays(self.num_actions)
        self.graph_weights.copy_(torch.from_numpy(weights))
        self.graph_node_rank.copy_(torch.from_numpy(node_rank))
        self.graph_successor_rank.copy_(torch.from_numpy(successor_rank))
        self.test_set_pkg.fill_(test_set)
        self.set_pkg(weights.astype(graph.weights_dtype))  # checked at its file's precision
        self._retriever = None

    def retriever(self) -> kepp_paths.PathRetriever:
        self.require_pkg()
        if self._retriever is None:
            graph = kepp_paths.graph_from_arrays(
                *(b.cpu().numpy() for b in (self.graph_weights, self.graph_node_rank,
                                            self.graph_successor_rank)))
            self._retriever = kepp_paths.PathRetriever(graph, self.horizon)
            if bool(self.test_set_pkg):
                print_log(f'KEPP: {released_graph_note(self.released_graph)}',
                          logger='current', level=30)
        return self._retriever

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        self._retriever = None
        saved = state_dict.get(prefix + 'trained_horizon')
        if saved is not None and int(saved) != self.horizon:
            raise ValueError(f'KEPP: the checkpoint\'s step and plan models were trained at '
                             f'T={int(saved)}, this model has horizon={self.horizon}; load a '
                             'checkpoint of this horizon (the step model and the PKG paths '
                             'depend on T)')
        self._check_graph_source(state_dict, prefix)
        self._note_step_checkpoint_unused(state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @staticmethod
    def options_shown_by(state_dict: dict) -> dict:
        """{option: (value, what shows it)} of the options a checkpoint's weights fix: the
        diffusion steps of the plan and step models (``PDPP.options_shown_by``)."""
        shown = {}
        for option, prefix in (('n_timesteps', 'plan.'), ('step_n_timesteps', 'step.')):
            steps = DiffusionModel.steps_shown_by(state_dict, prefix)
            if steps:
                shown[option] = steps['n']
        return shown

    @staticmethod
    def options_unread_with(state_dict: dict) -> tuple:
        """The options a model loading ``state_dict`` (a checkpoint's) does not read:
        ``step_checkpoint`` when it holds a trained step model (its own is used; a test's
        other ``model.step_checkpoint`` changes nothing, so it is no 'changed from training')."""
        ready = state_dict.get('step_ready')
        return ('step_checkpoint',) if ready is not None and bool(ready) else ()

    def _note_step_checkpoint_unused(self, state_dict, prefix) -> None:
        """A checkpoint holding a trained step model brings its own: ``model.step_checkpoint``
        is then not read, which the log says (it was silently ignored)."""
        ready = state_dict.get(prefix + 'step_ready')
        if self.step_checkpoint and ready is not None and bool(ready):
            print_log(f'KEPP: model.step_checkpoint={self.step_checkpoint!r} is not used: the '
                      'loaded checkpoint holds its own trained step model, which this run uses',
                      logger='current', level=30)

    def _check_graph_source(self, state_dict, prefix) -> None:
        """A checkpoint's graph is the one a test uses (its plan model was trained on its
        paths), so ``model.released_graph`` must say where it came from: set for a graph read
        from that released file (the results row is then marked test-set PKG), unset for a
        graph counted on the training videos. Else ``ValueError``: the option would be
        ignored, or the row would not be marked."""
        released, ranks = (state_dict.get(prefix + name) for name in ('test_set_pkg',
                                                                        'graph_node_rank'))
        if released is None or ranks is None or not bool((ranks >= 0).any()):
            return  # no graph in the checkpoint: build_pkg installs the configured one
        check_saved_graph(state_dict, prefix, counted=not bool(released))
        if bool(released) and not self.released_graph:
            raise ValueError('KEPP: the checkpoint\'s graph was read from a released graph file '
                             f'({TEST_SET_PKG}), but model.released_graph is not set, so the '
                             'results would not be marked as such: set model.released_graph to '
                             'that file, or test a checkpoint trained without it')
        if not bool(released) and self.released_graph:
            raise ValueError(f'KEPP: model.released_graph={self.released_graph!r}, but the '
                             'checkpoint\'s graph was counted on its training videos, and a test '
                             'uses the checkpoint\'s graph (its plan model was trained on its '
                             'paths): the released file would be ignored; drop '
                             'model.released_graph, or test a checkpoint trained with it')
        if bool(released):
            weights, node_rank, successor_rank = released_graph(
                self.released_graph, self.num_actions, self.horizon).to_arrays(self.num_actions)
            saved = [state_dict.get(prefix + name) for name in
                     ('graph_weights', 'graph_node_rank', 'graph_successor_rank')]
            # the file's weights at the precision the checkpoint stores them in: a checkpoint
            # converted to float32 holds the same graph (its rounding is the reduced-precision
            # note's), not another one
            if any(value is None or value.shape != mine.shape or not torch.equal(
                    value.cpu(), torch.from_numpy(mine).to(value.dtype))
                   for value, mine in zip(saved, (weights, node_rank, successor_rank))):
                raise ValueError(f'KEPP: the checkpoint\'s graph is not the graph of '
                                 f'model.released_graph={self.released_graph!r}; give the '
                                 'graph file the checkpoint was trained with')

    def path_block(self, first, last, device) -> tuple:
        """((B, T, 2N) PKG | LLM blocks, (B, 2, T) paths, (B,) fallback used) of B pairs."""
        retriever = self.retriever()
        before = len(retriever.fallback_pairs)
        paths, fallback = retriever.batch(first.tolist(), last.tolist())
        for pair in retriever.fallback_pairs[before:]:
            fallback_path = kepp_paths.fallback_path(*pair, self.horizon)
            unseen = kepp_paths.unseen_actions(retriever.graph, *pair)
            why = (f'{" and ".join(unseen)} never occurs in the PKG (no training transition; '
                   'the official retrieval skips such a pair)' if unseen else
                   f'no walk of {self.horizon} nodes from action {pair[0]} to {pair[1]} in '
                   'the PKG')
            print_log(f'KEPP: {why}; the fallback {fallback_path} is used '
                      f'({len(retriever.fallback_pairs)} pairs, {retriever.fallback_windows} '
                      'windows so far)', logger='current', level=30)
        block = torch.from_numpy(kepp_paths.path_block(paths, self.num_actions)).to(device)
        return torch.cat([block, block], -1), torch.from_numpy(paths), torch.from_numpy(fallback)

    # ------------------------------------------------------------------ the step model
    def require_step(self) -> None:
        if not bool(self.step_ready):
            raise RuntimeError(
                'KEPP: the step model was never trained (step_ready is False); train with the '
                "config (its custom_hooks hold KEPPStepModelHook), give model.step_checkpoint, "
                'or load a checkpoint of a trained KEPP')

    def step_loss(self, inputs, data_samples) -> torch.Tensor:
        """The step model's diffusion loss (its own training stage)."""
        self.check_batch(inputs, data_samples['plan'])
        return self.step.loss(data_samples['plan'], self.step.empty_block(inputs), inputs)

    @torch.no_grad()
    def predict_endpoints(self, inputs, data_samples=None) -> torch.Tensor:
        """(B, 2): the step model's first and last actions (DDIM, argmax)."""
        self.require_step()
        x0, _, _ = self.step.sample(self.step.empty_block(inputs), inputs, data_samples)
        return self.step.actions(x0)[:, [0, -1]].argmax(-1)

    # ------------------------------------------------------------------ training
    def check_batch(self, inputs, plan=None) -> None:
        dim = inputs['start'].shape[-1]
        if dim != self.plan.feature_dim:
            raise ValueError(f'KEPP: the observations have {dim} dims but model.feature_dim='
                             f'{self.plan.feature_dim}; set it to the dataset\'s')
        if plan is not None and plan.numel() and not (
                0 <= int(plan.min()) <= int(plan.max()) < self.num_actions):
            raise ValueError(f'KEPP: the batch has action ids in [{int(plan.min())}, '
                             f'{int(plan.max())}] but model.num_actions={self.num_actions}')

    def training_endpoints(self, data_samples) -> torch.Tensor:
        """(B, 2) the (first, last) actions the training paths are retrieved for."""
        plan = data_samples['plan']
        if self.train_paths == 'truth':
            return plan[:, [0, -1]]
        index = data_samples.get('index')
        if index is None or not len(self.train_endpoints):
            raise RuntimeError('KEPP: train_paths=\'step\' needs the step model\'s predictions '
                               'on the training windows (KEPPStepModelHook computes them before '
                               "training) and batches with 'index'")
        return self.train_endpoints[index.to(self.train_endpoints.device)]

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        self.check_batch(inputs, data_samples['plan'])
        endpoints = self.training_endpoints(data_samples)
        block, _, _ = self.path_block(endpoints[:, 0], endpoints[:, 1], inputs['start'].device)
        return dict(loss_diffusion=self.plan.loss(data_samples['plan'], block, inputs))

    # ------------------------------------------------------------------ prediction
    def plan_fields(self, inputs, data_samples) -> dict:
        self.check_batch(inputs)
        endpoints = self.predict_endpoints(inputs, data_samples)
        block, paths, fallback = self.path_block(endpoints[:, 0], endpoints[:, 1],
                                                 inputs['start'].device)
        x0, _, _ = self.plan.sample(block, inputs, data_samples, self.sampler)
        return dict(action_scores=self.plan.actions(x0), step_endpoints=endpoints,
                    pkg_paths=paths, pkg_fallback=fallback)

    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        return self.plan_fields(inputs, data_samples)['action_scores']

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        fields = self.plan_fields(inputs, data_samples)
        return dict(pred_plan=fields['action_scores'].argmax(-1), **fields)
