"""Stand-in official checkouts for tools/compare_official_training.py (one test file per
method uses them: the comparisons are the suite's longest runs, split so workers share them).

A stand-in honours the official script's interface (its flags, the files its loader reads, the
lines its log prints) and computes what the comparison must read back from it: the window
counts from the files written for its loader, and losses / metrics chosen per epoch and seed.
No official code is needed (CI).
"""
import io
import os
import textwrap
from contextlib import redirect_stdout
from pathlib import Path
from unittest import mock

import pytest

from vpn_plugin.errors import TRACEBACK_VARIABLE
from vpn_plugin.protocol.official import load_method

from tool_modules import load_tool

SMALL = ['--size', 'embed_dim=16', '--size', 'attn_heads=2', '--size', 'num_layers=1']

# the stand-in main.py of SCHEMA: tools/parser.py's flags, the NIV loader's window count, and
# main.py's log lines; losses 3/(e+1) + seed/100, test SR [9, 5, 7, ...] (best at epoch 1)
SCHEMA_MAIN = textwrap.dedent('''
    import argparse, json, logging, os, sys
    import numpy as np
    parser = argparse.ArgumentParser()
    for name in ('optimizer lr dropout batch_size epochs max_traj_len M aug_range attn_heads '
                 'num_layers step_size lr_decay model_name dataset num_action num_tasks '
                 'img_input_dim text_input_dim embed_dim root_dir train_json valid_json '
                 'features_dir saved_path seed').split():
        parser.add_argument('--' + name, required=True)
    parser.add_argument('--no_state_task', action='store_true')
    args = parser.parse_args()
    assert os.path.isdir(os.path.join(args.saved_path, args.dataset))
    text = np.load('data/state_description_features/niv_state_prompt_features.npy')
    assert text.shape == (int(args.num_action), 6, 768), text.shape
    logger = logging.getLogger()
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler()  # stderr, as utils.get_logger
    handler.setFormatter(logging.Formatter('[%(asctime)s][main.py][line:1][INFO] %(message)s'))
    logger.addHandler(handler)
    def windows(path):
        count = 0
        for video, info in json.load(open(path)).items():
            if os.path.exists(os.path.join(args.features_dir, video + '.npy')):
                count += max(0, len(info['steps']) - int(args.max_traj_len) + 1)
        return count
    DROP = int(os.environ.get('STAND_IN_DROP', '0'))
    logger.info('Training set volumn: %d Testing set volumn: %d'
                % (windows(args.train_json) - DROP, windows(args.valid_json)))
    seed = int(args.seed)
    for e in range(int(args.epochs)):
        loss = 3.0 / (e + 1) + seed / 100
        logger.info('Epoch: %d State Loss: %.2f Top1 Acc: 10.00%%' % (e + 1, loss))
        logger.info('\\tAction Loss: %.2f, SR: 1.00%% Acc1: 1.00%% Acc5: 1.00%% MIoU: 1.00' % loss)
        logger.info('\\tTask Loss: %.2f, Acc1: 50.00%%' % loss)
        logger.info('\\tState Pred Loss: 0.50')
        sr = [9, 5, 7][e % 3] + seed
        logger.info('Epoch: %d State Loss: 2.00 Top1 Acc: 10.00%%' % (e + 1))
        logger.info('\\tAction Loss: 2.00, SR: 1.00%% Acc1: 1.00%% Acc5: 1.00%% MIoU: 1.00')
        logger.info('\\tViterbi, SR: %.2f%% Acc: %.2f%% MIoU: %.2f' % (sr, 2 * sr, 3 * sr))
        logger.info('\\tTask Loss: 1.00, Acc1: 50.00%')
        logger.info('\\tState Pred Loss: 0.20')
''')


def stand_in(root: Path, method: str, folder: str, scripts: dict) -> Path:
    """``root/folder``: a checkout holding every file ``method``'s plug-in requires (empty),
    with ``scripts`` ({path: text}) as the stand-in official scripts."""
    official = root / folder
    for name in load_method(method).required:
        (official / name).parent.mkdir(parents=True, exist_ok=True)
        (official / name).write_text('')
    for name, text in scripts.items():
        (official / name).write_text(text)
    return official


def smaller_ours(monkeypatch, method: str, **options):
    """``method``'s plug-in whose runs of ours add ``options`` to their cfg_options (ours at
    small sizes: the plumbing is under test)."""
    plugin = load_method(method)
    full = plugin.our_run

    def small(data, settings):
        run = full(data, settings)
        return dict(run, cfg_options={**run['cfg_options'], **options})
    monkeypatch.setattr(plugin, 'our_run', small)


def schema_stand_in(root: Path) -> Path:
    """A folder with the files a SCHEMA checkout must hold; main.py is the stand-in."""
    return stand_in(root, 'schema', 'SCHEMA', {'main.py': SCHEMA_MAIN})


def run_tool(*args) -> str:
    """The tool in this process, as a user without VPN_TRACEBACK runs it; returns its report
    (stdout)."""
    printed = io.StringIO()
    with redirect_stdout(printed), mock.patch.dict(os.environ):
        os.environ.pop(TRACEBACK_VARIABLE, None)
        load_tool('compare_official_training').main([str(a) for a in args])
    return printed.getvalue()


def tool_error(*args) -> str:
    """The message the tool stops with (exit status 1)."""
    with pytest.raises(SystemExit) as stopped:
        run_tool(*args)
    assert isinstance(stopped.value.code, str), stopped.value.code
    return stopped.value.code


# ----------------------------------------------------------------------------- PDPP
# stand-ins of train_mlp.py, temp.py (with the two empty paths its README says to edit) and
# main_distributed.py: utils/args.py's flags, the TensorBoard tags the scripts log, the
# checkpoints the next stage reads; classifier loss 1/(e+1), diffusion loss 2/(e+1) + seed/10,
# test SR per 5 epochs [20, 10, ...] + seed (best: epoch 5)
PDPP_ARGS = textwrap.dedent('''
    import argparse, os, sys, time
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    class SummaryWriter:  # the event files of torch's / tensorboardX's, without importing
        # torch (~2 s CPU per stand-in run); the official's tensorboardX stores
        # 'Val/EpochAcc@1' as 'Val/EpochAcc_1': the stand-ins write that name
        def __init__(self, folder):
            self.events = EventFileWriter(folder)
        def add_scalar(self, tag, value, step):
            value = Summary.Value(tag=tag, simple_value=value)
            self.events.add_event(Event(step=step, wall_time=time.time(),
                                        summary=Summary(value=[value])))
        def flush(self):
            self.events.flush()
    parser = argparse.ArgumentParser()
    for name in ('dataset action_dim class_dim observation_dim n_diffusion_steps lr '
                 'batch_size_val root cudnn_benchmark horizon epochs n_train_steps batch_size '
                 'num_thread_reader seed checkpoint_dir log_root json_path_train '
                 'json_path_val').split():
        parser.add_argument('--' + name, required=True)
    for name in ('pin_memory', 'resume', 'evaluate'):
        parser.add_argument('--' + name, action='store_true')
    args = parser.parse_args()
    EPOCHS, SEED = int(args.epochs), int(args.seed)
    def writer(suffix):
        folder = os.path.join(args.log_root, args.log_root + suffix + '_'
                              + time.strftime('%Y%m%d%H%M%S') + '_' + args.dataset)
        print('logging outputs to ', folder)
        return SummaryWriter(folder)
''')
PDPP_MLP = PDPP_ARGS + textwrap.dedent('''
    import torch
    logs = writer('_mlp')
    for folder in ('checkpoint_mlp/' + args.checkpoint_dir, 'save_max_mlp'):
        os.makedirs(folder, exist_ok=True)
    for e in range(EPOCHS):
        if (e + 1) % 2 == 0:
            logs.add_scalar('Val/EpochAcc_1', 50.0, e + 1)
        logs.add_scalar('Train/EpochLoss', 1.0 / (e + 1), e + 1)
        logs.flush()
    torch.save({'model': {}}, 'checkpoint_mlp/%s/epoch%04d.pth.tar' % (args.checkpoint_dir, EPOCHS))
    torch.save({'model': {}}, 'save_max_mlp/epoch0002.pth.tar')
''')
PDPP_TEMP = PDPP_ARGS + textwrap.dedent('''
    import json, torch
    checkpoint_ = torch.load("", map_location='cuda:0')
    windows = json.load(open(args.json_path_val))
    for window in windows:
        window['id']['event_class'] = window['id']['task_id']
    data_name = ""
    json.dump(windows, open(data_name, 'w'))
    print('acc: ', 0.95 if 'save_max' in os.environ['VPN_PDPP_CLASSIFIER'] else 0.9)
''')
PDPP_MAIN = PDPP_ARGS + textwrap.dedent('''
    import json
    UNET = dict(dim=256, dim_mults=(1, 2, 4))  # as its TemporalUnet call
    assert all('event_class' in w['id'] for w in json.load(open(args.json_path_val)))
    logs = writer('')
    for e in range(EPOCHS):
        logs.add_scalar('Train/EpochLoss', 2.0 / (e + 1) + SEED / 10, e + 1)
        if (e + 1) % 5 == 0:
            sr = [20, 10][((e + 1) // 5 - 1) % 2] + SEED
            for tag, value in (('Traj_Success_Rate', sr), ('EpochAcc_1', 2 * sr),
                               ('MIoU2', 3 * sr), ('MIoU1', 4 * sr)):
                logs.add_scalar('Val/' + tag, value, e + 1)
        logs.flush()
''')


def pdpp_stand_in(root: Path) -> Path:
    return stand_in(root, 'pdpp', 'PDPP', {'train_mlp.py': PDPP_MLP, 'temp.py': PDPP_TEMP,
                                           'main_distributed.py': PDPP_MAIN})


# ----------------------------------------------------------------------------- KEPP
KEPP_ARGS = PDPP_ARGS.replace("'json_path_val').split():", "'json_path_val steps_path "
                              "step_model_output class_dim_graph class_dim_llama num_seq_PKG "
                              "num_seq_LLM').split():").replace(', required=True)', ')')
# the step and plan models log as PDPP's main_distributed.py: test SR [20, 10, ...] + seed (the
# official selection keeps epoch 5), the step model's endpoint accuracy 40, 60, ...
KEPP_TRAIN = KEPP_ARGS + textwrap.dedent('''
    import json, torch
    plan = args.class_dim_graph is not None
    if plan:
        for name in ('json_path_train', 'json_path_val'):
            assert all(len(w['id']['graph_action_path']) == 2
                       for w in json.load(open(getattr(args, name))))
    logs = writer('')
    for e in range(EPOCHS):
        logs.add_scalar('Train/EpochLoss', (3.0 if plan else 5.0) / (e + 1), e + 1)
        if (e + 1) % 5 == 0:
            sr = [20, 10][((e + 1) // 5 - 1) % 2] + SEED
            scores = dict(Traj_Success_Rate=sr, MIoU2=3 * sr, acc_a0=40 + 20 * (e // 5),
                          acc_aT=40 + 20 * (e // 5))
            scores['EpochAcc_1'] = 2 * sr if plan else scores['acc_a0']
            for tag, value in scores.items():
                logs.add_scalar('Val/' + tag, value, e + 1)
        logs.flush()
    folder = os.path.join(os.path.dirname(__file__), 'checkpoint', args.checkpoint_dir)
    os.makedirs(folder, exist_ok=True)
    torch.save({'ema': {}}, os.path.join(folder, 'epoch%04d.pth.tar' % EPOCHS))
''')
KEPP_STEPS = KEPP_ARGS + textwrap.dedent('''
    import json, torch
    checkpoint_path = ""
    torch.load(checkpoint_path, map_location='cuda:0')
    windows = json.load(open(args.json_path_val))
    for window in windows:
        actions = [a for _, _, a in window['id']['legal_range']]
        window['id']['pred_list'] = actions
    json.dump([w['id']['pred_list'] for w in windows], open(args.steps_path, 'w'))
    json.dump(windows, open(args.step_model_output, 'w'))
''')
AUTHOR = '/l/users/ravindu.nagasinghe/KEPP'
KEPP_GRAPH = textwrap.dedent(f'''
    import json, os, pickle
    graph_save_path = '{AUTHOR}/PKG/graphs/CrossTaskHow/out_edge_N_graph/trained_graph.pkl'
    mode = input('Select mode: ')
    if mode == 'train_minmax':
        open('{AUTHOR}/PKG/data/train_graph_lists/crossTask/training_action_list.txt')
    elif mode == 'train_out_n':
        counts = {{}}
        for line in open('{AUTHOR}/PKG/data/train_graph_lists/crossTask/training_action_list.txt'):
            sequence = json.loads(line)['legal_range']
            for u, v in zip(sequence[:-1], sequence[1:]):
                counts.setdefault(u, {{}})
                counts.setdefault(v, {{}})
                counts[u][v] = counts[u].get(v, 0) + 1
        state = {{'graph': {{}}, '_node': {{n: {{}} for n in counts}},
                 '_succ': {{u: {{v: {{'weight': c / sum(row.values())}} for v, c in row.items()}}
                           for u, row in counts.items()}}}}
        body = pickle.dumps(state, protocol=2)[2:-1]
        open(graph_save_path, 'wb').write(
            b'\\x80\\x02cnetworkx.classes.digraph\\nDiGraph\\n)\\x81' + body + b'b.')
    elif mode == 'validate':
        data = json.load(open('{AUTHOR}/step/train_data_step_model.json'))
        for item in data:
            first, last = item['id']['pred_list'][0], item['id']['pred_list'][-1]
            item['id']['graph_action_path'] = [[first, first, last, last]] * 2
        json.dump(data, open('{AUTHOR}/plan/data_lists/train_list.json', 'w'))
''')


def kepp_stand_in(root: Path) -> Path:
    return stand_in(root, 'kepp', 'KEPP', {
        'step/main_distributed.py': KEPP_TRAIN, 'step/inference.py': KEPP_STEPS,
        'PKG/graph_creation.py': KEPP_GRAPH, 'plan/main_distributed.py': KEPP_TRAIN})


# ----------------------------------------------------------------------------- CEFITO
# stand-ins of its three scripts: add_config_arguments' flags, the lines its loggers print
# ("[HH:MM:SS] ..." on stderr); classifier loss 1/(e+1), test top-1 [80, 90, 85] (best: epoch
# 2); predictor loss 4/(e+1) + seed/100, test SR [30, 20, ...] + seed every 3rd epoch
CEFITO_ARGS = textwrap.dedent('''
    import argparse, json, logging, sys
    parser = argparse.ArgumentParser()
    parser.add_argument('config')
    parser.add_argument('--paths', required=True)
    parser.add_argument('--set', dest='overrides', action='append', default=[])
    for name in ('output', 'checkpoint', 'source'):
        parser.add_argument('--' + name)
    args = parser.parse_args()
    sets = dict(item.split('=', 1) for item in args.overrides)
    paths = json.load(open(args.paths))['niv']
    logger = logging.getLogger('cefito')
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter('[%(asctime)s] %(message)s', datefmt='%H:%M:%S'))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    import cefito  # the package comes from PYTHONPATH=<copy>/src
''')
CEFITO_CLASSIFIER = CEFITO_ARGS + textwrap.dedent('''
    train, val = (json.load(open(paths[k])) for k in ('train_json', 'val_json'))
    logger.info('train %d | val %d samples' % (len(train), len(val)))
    assert sets['task_classifier.epochs'] == '3'
    for e in range(3):
        logger.info('epoch %d/3: loss %.4f | val top-1 %.2f | top-3 99.00'
                    % (e + 1, 1 / (e + 1), [80, 90, 85][e]))
    open(args.output, 'w').write('weights')
''')
CEFITO_PREDICT = CEFITO_ARGS + textwrap.dedent('''
    records = json.load(open(args.source))
    for record in records:
        record['id']['event_class_top1'] = record['id']['task_id']
    json.dump(records, open(args.output, 'w'))
''')
CEFITO_TRAIN = CEFITO_ARGS + textwrap.dedent('''
    import numpy as np
    oracle = {'false': 0, 'true': 1}[sets['eval.oracle_task']]  # the true task: SR + 5
    train, val = (json.load(open(paths[k])) for k in ('train_json', 'val_json'))
    assert all('event_class_top1' in r['id'] for r in val)
    table = np.load(paths['action_embeddings'], allow_pickle=True).item()
    assert sorted(table) == list(range(48)) and table[0].shape == (512,)
    logger.info('train samples: %d | val samples: %d' % (len(train), len(val)))
    epochs, seed = int(sets['train.epochs']), int(sets['train.seed'])
    for e in range(1, epochs + 1):
        logger.info('epoch %d/%d' % (e, epochs))
        logger.info('epoch %d: train loss %.4f | val loss 1.0000 | lr 5.00e-05'
                    % (e, 4 / e + seed / 100))
        if e % 3 == 0:
            sr = [30, 20][(e // 3 - 1) % 2] + seed + 5 * oracle
            logger.info('epoch %d: SR %.2f | mAcc %.2f | mIoU %.2f' % (e, sr, 2 * sr, 3 * sr))
''')


def cefito_stand_in(root: Path) -> Path:
    official = stand_in(root, 'cefito', 'cefito', {
        'scripts/train_task_classifier.py': CEFITO_CLASSIFIER,
        'scripts/predict_task_labels.py': CEFITO_PREDICT, 'scripts/train.py': CEFITO_TRAIN})
    (official / 'src/cefito/__init__.py').write_text('')
    return official
