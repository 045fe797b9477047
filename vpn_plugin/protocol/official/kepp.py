"""KEPP (Ravindu-Yasas-Nagasinghe/KEPP): its README's pipeline, against ours, at T=4.

The official run, per seed, in a copy of the checkout (README: "Train Step model", "Generate
paths from procedure knowledge graph", "Train plan model"):

1. ``step_model``: ``step/main_distributed.py`` trains the step model (PDPP's U-Net over
   [actions | observation], middle steps zeroed); every 5 epochs it tests on the test windows
   and keeps the best in ``step/save_max`` (**test-set selection**; the README then infers with
   that checkpoint);
2. ``steps_train`` / ``steps_test``: ``step/inference.py`` writes the first/last actions the
   step model predicts for the training and the test windows; its checkpoint path (line 329,
   an empty string the README says to edit) reads ``$VPN_KEPP_STEP_CHECKPOINT``: here the
   last epoch's (selection off, as ours);
3. ``graph``: ``PKG/graph_creation.py``, mode ``train_out_n`` typed at its prompt, builds the
   graph from the training videos' action sequences; ``paths_train`` / ``paths_test``: mode
   ``validate`` retrieves the two paths for each window's predicted first/last actions. Its
   hard-coded paths (graph file, action list, input and output lists; the README says to edit
   them) read ``$VPN_KEPP_GRAPH``, ``$VPN_KEPP_ACTION_LIST``, ``$VPN_KEPP_STEP_OUTPUT``,
   ``$VPN_KEPP_PATHS``;
4. ``train``: ``plan/main_distributed.py`` trains the plan model on those paths and every 5
   epochs samples the test windows (DDPM, the EMA weights), keeping the best test success rate
   (**test-set selection**).

Flags: PDPP's NIV settings (KEPP keeps PDPP's recipe; 50 diffusion steps, lr 3e-4), the graph
and "LLM" blocks of N = 48 with 2 paths (``--num_seq_PKG 2``), except ``--epochs``,
``--n_train_steps``, ``--batch_size``, ``--seed``, data paths and ``--num_thread_reader``. The
official retrieval is hard-wired to paths of 4 actions: the comparison runs at T=4.

Ours: ``configs/baselines/kepp_niv_t4.py`` with KEPP's observations ('kepp'), the official
validation's DDPM sampler (``model.sampler='ddpm'``), every training window (no held-out
validation), the same batch size and steps, the last epoch tested. Our graph is checked against
the official one: :func:`graph_check` rebuilds it with ``core.kepp_paths.build_graph`` from the
same training sequences and compares nodes, edges (in order) and weights.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from .framework import Change, ComparisonData, Settings, SideRun, Stage, flag_list, \
    read_event_scalars, seconds_between
from .pdpp import (UNET_DIM, VAL_TAGS, WORKERS, Pdpp, event_folders, logging_started,
                   official_selection, patch_file, read_diffusion_training, value_at,
                   window_json)

COMMON = dict(dataset='NIV', action_dim=48, observation_dim=1536, n_diffusion_steps=50, lr=3e-4,
              batch_size_val=256, root='dataset/NIV', cudnn_benchmark=1, pin_memory=True,
              resume=True, evaluate=True)
PLAN = dict(class_dim_graph=48, class_dim_llama=48, num_seq_PKG=2, num_seq_LLM=2)
AUTHOR_DIR = '/l/users/ravindu.nagasinghe/KEPP'
STEP_PATCH = (('checkpoint_path = ""',
               'checkpoint_path = os.environ["VPN_KEPP_STEP_CHECKPOINT"]', 1),)
GRAPH_PATCH = (
    (f"'{AUTHOR_DIR}/PKG/graphs/CrossTaskHow/out_edge_N_graph/trained_graph.pkl'",
     "os.environ['VPN_KEPP_GRAPH']", 1),
    (f"'{AUTHOR_DIR}/PKG/data/train_graph_lists/crossTask/training_action_list.txt'",
     "os.environ['VPN_KEPP_ACTION_LIST']", 2),
    (f"'{AUTHOR_DIR}/step/train_data_step_model.json'", "os.environ['VPN_KEPP_STEP_OUTPUT']", 1),
    (f"'{AUTHOR_DIR}/plan/data_lists/train_list.json'", "os.environ['VPN_KEPP_PATHS']", 1))
HORIZON = 4  # graph_creation.validate_graph_final: max_path_length=4


class Kepp(Pdpp):
    name = 'kepp'
    label = 'KEPP'
    repository = 'Ravindu-Yasas-Nagasinghe/KEPP'
    entry = 'plan/main_distributed.py'
    required = ('step/main_distributed.py', 'step/inference.py', 'PKG/graph_creation.py',
                'plan/main_distributed.py', 'plan/dataloader/data_load.py',
                'step/dataloader/data_load.py')
    sizes = {'batch_size': (256, 'batch size of the step and plan models (--batch_size; '
                            'ours: train_dataloader.batch_size)'),
             'n_train_steps': (50, 'steps per epoch of both models (--n_train_steps; ours: '
                               'train_dataloader.batch_sampler.steps_per_epoch)'),
             'unet_dim': (UNET_DIM, 'width of the step and plan U-Nets (hard-coded dim=256 '
                                    'in step/main_distributed.py, step/inference.py, '
                                    'plan/main_distributed.py: patched in the copy; ours: '
                                    'model.dim)')}
    unet_files = ('step/main_distributed.py', 'step/inference.py', 'plan/main_distributed.py')
    shims = ('cuda_noop', 'gloo_single_process', 'load_on_cpu')
    rescorable = True

    def check_settings(self, settings: Settings) -> None:
        super().check_settings(settings)
        if settings.horizon != HORIZON:
            raise ValueError(f'--horizon {settings.horizon}: the official KEPP retrieves paths '
                             f'of {HORIZON} actions only (PKG/graph_creation.py); give '
                             f'--horizon {HORIZON}')

    # ------------------------------------------------------------------ official side
    def official_changes(self, settings: Settings) -> list[Change]:
        changes = [Change('epochs', f'--epochs {settings.epochs} (PDPP\'s NIV setting: 130) '
                          'for the step and the plan model; the warm-up/step schedule spans '
                          'the shortened run'),
                   Change('data', '--seed <seed> per run, --checkpoint_dir seed<s>, '
                          '--log_root <run dir>/log'),
                   Change('environment', f'--num_thread_reader {WORKERS} (README: 8; 2 CPU '
                          'cores here); --multiprocessing-distributed left out (it spawns '
                          'one process per GPU, none here)'),
                   Change('patch', "step/inference.py: its checkpoint path (line 329, '' in "
                          'the release; the README says to edit it) reads '
                          '$VPN_KEPP_STEP_CHECKPOINT: the last epoch\'s step model'),
                   Change('patch', "PKG/graph_creation.py: its author's absolute paths (graph "
                          'file, action list, step-model output, path lists; the README says '
                          'to edit them) read $VPN_KEPP_GRAPH, $VPN_KEPP_ACTION_LIST, '
                          '$VPN_KEPP_STEP_OUTPUT, $VPN_KEPP_PATHS; its mode prompt is answered '
                          'on stdin')]
        return changes + self.size_changes(settings, 'README')

    def prepare_official(self, copy_dir: Path, data: ComparisonData,
                         settings: Settings) -> list[Change]:
        patch_file(copy_dir / 'step/inference.py', STEP_PATCH)
        patch_file(copy_dir / 'PKG/graph_creation.py', GRAPH_PATCH)
        unet = self.unet_dim_patch(copy_dir, settings)
        for split in ('train', 'test'):
            (data.official_dir / f'kepp_{split}.json').write_text(json.dumps(
                window_json(data.windows[split], data.feature_dir, data.taxonomy)))
        with open(data.official_dir / 'kepp_action_list.txt', 'w') as out:
            for video in data.videos['train']:
                out.write(json.dumps(dict(vid=video.feature,
                                          legal_range=[a for _, _, a in video.steps])) + '\n')
        for folder in ('step/log', 'plan/log', 'step/checkpoint', 'plan/checkpoint',
                       'step/save_max', 'plan/save_max'):
            (copy_dir / folder).mkdir(parents=True, exist_ok=True)
        return unet + [Change('data', f'--json_path_train / --json_path_val of the step model: '
                       f'{data.official_dir}/kepp_{{train,test}}.json, the unified windows in '
                       "the loader's format; the plan model's: the path lists of paths_train "
                       '/ paths_test'),
                Change('data', f'graph training list {data.official_dir}/kepp_action_list.txt:'
                       ' one line {"vid", "legal_range": [action ids]} per training video, '
                       'steps in annotation order'),
                Change('data', f'features: {data.feature_dir} (synthetic, public layout)')]

    def official_commands(self, copy_dir, data, settings, seed, run_dir):
        for model in ('step', 'plan'):  # an earlier seed's checkpoints would be resumed
            clear_checkpoints(copy_dir / model, seed)
        common = dict(COMMON, observation_dim=3 * settings.frame_dim,
                      horizon=settings.horizon, epochs=settings.epochs,
                      n_train_steps=self.size(settings, 'n_train_steps'),
                      batch_size=self.size(settings, 'batch_size'),
                      num_thread_reader=WORKERS, seed=seed, checkpoint_dir=f'seed{seed}',
                      log_root=run_dir / 'log')
        windows = {split: data.official_dir / f'kepp_{split}.json' for split in ('train', 'test')}
        yield Stage('step_model', ['step/main_distributed.py', *flag_list(dict(
            common, json_path_train=windows['train'], json_path_val=windows['test']))])
        last = copy_dir / f'step/checkpoint/seed{seed}/epoch{settings.epochs:04d}.pth.tar'
        for split in ('train', 'test'):
            yield Stage(f'steps_{split}', ['step/inference.py', *flag_list(dict(
                common, json_path_val=windows[split],
                steps_path=run_dir / f'steps_{split}.json',
                step_model_output=run_dir / f'step_model_{split}.json'))],
                dict(VPN_KEPP_STEP_CHECKPOINT=last))
        graph = dict(VPN_KEPP_GRAPH=run_dir / 'graph.pkl',
                     VPN_KEPP_ACTION_LIST=data.official_dir / 'kepp_action_list.txt')
        yield Stage('graph', ['PKG/graph_creation.py'], graph, stdin='train_out_n\n')
        for split in ('train', 'test'):
            yield Stage(f'paths_{split}', ['PKG/graph_creation.py'], dict(
                graph, VPN_KEPP_STEP_OUTPUT=run_dir / f'step_model_{split}.json',
                VPN_KEPP_PATHS=run_dir / f'paths_{split}.json'), stdin='validate\n')
        yield Stage('train', [self.entry, *flag_list(dict(
            common, **PLAN, json_path_train=run_dir / 'paths_train.json',
            json_path_val=run_dir / 'paths_test.json'))])

    def official_epochs_done(self, records: list, run_dir: Path) -> int:
        folders = event_folders(run_dir, 'log_2')  # the plan model's is the second
        return (len(read_event_scalars(folders[1]).get('Train/EpochLoss', []))
                if len(folders) > 1 else 0)

    def read_official(self, records, copy_dir, run_dir, settings, seed, data) -> SideRun:
        windows = {split: len(json.loads((run_dir / f'paths_{split}.json').read_text()))
                   for split in ('train', 'test')}
        folders = event_folders(run_dir, 'log_2')  # step model first, plan model second
        if len(folders) != 2:
            raise ValueError(f'{run_dir}: expected the TensorBoard folders of the step and the '
                             f'plan model, found {[f.name for f in folders]}')
        run = read_diffusion_training(folders[1], records['train'], settings.epochs, seed,
                                      windows)
        run.selection += '; the step model of the last epoch'
        run.stages = dict(step_model=read_step_stage(folders[0], records['step_model'],
                                                     settings.epochs),
                          graph=graph_check(run_dir / 'graph.pkl', data))
        return run

    def official_checkpoints(self, copy_dir: Path, settings: Settings, seed: int) -> dict:
        """The last epoch's checkpoints of the step and the plan model (``save_checkpoint``:
        ``<model>/checkpoint/seed<s>/epoch<E>.pth.tar``, what the stages above test)."""
        name = f'epoch{settings.epochs:04d}.pth.tar'
        return {model: Path(copy_dir) / model / 'checkpoint' / f'seed{seed}' / name
                for model in ('step', 'plan')}

    def official_into_ours(self, checkpoint: dict, kept: dict, source: str) -> dict:
        """Our KEPP checkpoint with the official U-Nets. mmengine's ``EMAHook`` saves the
        averaged weights as ``state_dict`` (what a test scores) and the trained ones as
        ``ema_state_dict`` (swapped back on resume): the plan model's ``ema`` weights (what the
        official validation samples with) go into ``state_dict``, its ``model`` weights into
        ``ema_state_dict``; the step model's ``ema`` into both (the official ``inference.py``
        predicts with them; ours keeps only its step model's EMA). The graph buffers stay
        ours: the official graph is ours edge for edge (:func:`graph_check`, every seed)."""
        official = {name: torch.load(path, map_location='cpu', weights_only=True)
                    for name, path in kept.items()}
        scored = dict(plan=official['plan']['ema'], step=official['step']['ema'])
        trained = dict(plan=official['plan']['model'], step=official['step']['ema'])
        return dict(state_dict=unet_state(checkpoint['state_dict'], scored, source),
                    ema_state_dict=unet_state(checkpoint['ema_state_dict'], trained, source,
                                              prefix='module.'),  # also mmengine's 'steps'
                    meta=checkpoint['meta'])

    # ------------------------------------------------------------------ our side
    def our_run(self, data: ComparisonData, settings: Settings) -> dict:
        run = super().our_run(data, settings)
        options = dict(run['cfg_options'], **{'model.sampler': 'ddpm'})
        for split in ('train', 'test'):
            options[f'{split}_dataloader.dataset.observation'] = 'kepp'
        return dict(config=f'configs/baselines/kepp_niv_t{settings.horizon}.py',
                    cfg_options=options)

    def our_stages(self, work_dir: Path) -> dict:
        from vpn_plugin.engine.kepp_training import STEP_FILE
        saved = torch.load(Path(work_dir) / STEP_FILE, map_location='cpu', weights_only=True)
        record = saved['record']
        return dict(step_model=dict(losses=record['epoch_losses'],
                                    seconds=record['epoch_seconds']))


def unet_state(state: dict, weights: dict, source: str, prefix: str = '') -> dict:
    """``state`` (our KEPP state dict, its keys under ``prefix``) with ``plan.unet.*`` /
    ``step.unet.*`` taken from the official ``weights[model]`` (a
    ``GaussianDiffusion`` state dict: the U-Net under ``model.``, PDPP's names); every official
    U-Net tensor used once, names and shapes checked (``temporal_unet.from_official``). The
    two U-Nets are KEPP's only parameters; its other entries are buffers (schedules, graph,
    flags)."""
    from vpn_plugin.models.temporal_unet import from_official
    out = dict(state)
    for model in ('plan', 'step'):
        theirs = {key[len('module.'):] if key.startswith('module.') else key: value
                  for key, value in weights[model].items()}
        unet = f'{prefix}{model}.unet.'
        shapes = {key[len(unet):]: tuple(value.shape) for key, value in state.items()
                  if key.startswith(unet)}
        official = from_official(shapes, theirs, f'{source}: the official {model} model',
                                 ours=f'the {model} U-Net of our KEPP')
        for name, value in official.items():
            out[unet + name] = value.to(state[unet + name].dtype).clone()
    return out


def clear_checkpoints(folder: Path, seed: int) -> None:
    import shutil
    shutil.rmtree(folder / 'checkpoint' / f'seed{seed}', ignore_errors=True)
    for path in (folder / 'save_max').glob('epoch*.pth.tar'):
        path.unlink()


def read_step_stage(folder: Path, records: list, epochs: int) -> dict:
    """The step model: per-epoch losses and seconds, and its test accuracy of the first and
    last actions (mean of the two) at the last test pass and at the one it keeps."""
    events = read_event_scalars(folder)
    losses = [v for _, _, v in sorted(events['Train/EpochLoss'], key=lambda e: e[1])]
    if len(losses) != epochs:
        raise ValueError(f'{folder}: the official step model logged {len(losses)} epochs; '
                         f'expected {epochs}')
    endpoint = {step: (value_at(events, 'Val/acc_a0', step)
                       + value_at(events, 'Val/acc_aT', step)) / 2
                for _, step, _ in events['Val/acc_a0']}
    best = official_selection({step: {name: value_at(events, tag, step)
                                      for name, tag in VAL_TAGS.items()} for step in endpoint})
    return dict(losses=losses,
                seconds=seconds_between(events, 'Train/EpochLoss', logging_started(records)),
                accuracy=endpoint[epochs], selected_accuracy=endpoint[best],
                selected_epoch=best)


def graph_check(path: Path, data: ComparisonData) -> dict:
    """The official graph against ``core.kepp_paths.build_graph`` of the same training
    sequences: node and edge counts, whether nodes, edges and successor orders are identical,
    and the largest weight difference."""
    from vpn_plugin.core.kepp_paths import KEPPGraph, build_graph
    from vpn_plugin.datasets.safe_pickle import safe_load_digraph
    nodes, successors = safe_load_digraph(path)
    official = KEPPGraph(nodes, {u: [(v, a.get('weight')) for v, a in row]
                                 for u, row in successors.items()})
    ours = build_graph((v.feature, [a for _, _, a in v.steps]) for v in data.videos['train'])
    same = ([(u, v) for u, v, _ in official.edges()] == [(u, v) for u, v, _ in ours.edges()]
            and official.nodes == ours.nodes)
    difference = max((abs(a[2] - b[2]) for a, b in zip(official.edges(), ours.edges())),
                     default=0.0) if same else None
    return dict(nodes=len(official.nodes), edges=official.num_edges, ours_edges=ours.num_edges,
                identical_structure=same, max_weight_difference=difference)


METHOD = Kepp()
