"""tools/compare_official_training.py against stand-in official checkouts built here.

A stand-in honours the official script's interface (its flags, the files its loader reads, the
lines its log prints) and computes what the comparison must read back from it: the window
counts from the files written for its loader, and losses / metrics chosen per epoch and seed.
No official code is needed (CI).
"""
import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.protocol.official import load_method
from vpn_plugin.protocol.official.framework import EpochProgress, SideRun, read_records
from vpn_plugin.protocol.official.schema import read_schema_log

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


@pytest.fixture(autouse=True)
def no_traceback(monkeypatch):
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)


def run_tool(*args) -> str:
    """The tool in this process; returns its report (stdout)."""
    import io
    from contextlib import redirect_stdout
    printed = io.StringIO()
    with redirect_stdout(printed):
        load_tool('compare_official_training').main([str(a) for a in args])
    return printed.getvalue()


def tool_error(*args) -> str:
    """The message the tool stops with (exit status 1)."""
    with pytest.raises(SystemExit) as stopped:
        run_tool(*args)
    assert isinstance(stopped.value.code, str), stopped.value.code
    return stopped.value.code


def test_schema_against_a_stand_in(shared_data, tmp_path, capsys):
    official = schema_stand_in(tmp_path)
    out = tmp_path / 'out'
    printed = run_tool('--method', 'schema', '--official-dir', official, '--epochs', 2,
                       '--seeds', 0, 1, 2, '--out', out, '--data-root', shared_data, *SMALL)
    text = (out / 'comparison.md').read_text()
    assert text in printed
    # every change against the official run is listed
    for change in ('--epochs 2 (run_niv.sh: 500)', '--embed_dim 16 (run_niv.sh: 128)',
                   'niv_state_prompt_features.npy replaced', 'torch.Tensor.cuda',
                   "empty module 'clip'", '--features_dir'):
        assert change in text, change
    # the stand-in's losses and metrics come back, per epoch and seed
    official = [SideRun.load(out / f'official/seed{s}.json') for s in (0, 1, 2)]
    ours = [SideRun.load(out / f'ours/seed{s}.json') for s in (0, 1, 2)]
    assert official[1].losses['state'] == [3.01, 1.51]
    assert official[1].losses['total'] == pytest.approx([3 * x + 0.05 for x in (3.01, 1.51)])
    assert official[2].metrics == dict(success_rate=7.0, mean_accuracy=14.0, miou_legacy=21.0)
    assert official[2].selected['success_rate'] == 11.0 and official[2].selected_epoch == 1
    # both sides saw the same windows: the NIV test split and every training window
    assert official[0].windows == ours[0].windows == dict(train=697, test=270)
    assert len(ours[0].losses['total']) == 2 and all(s > 0 for s in ours[0].train_seconds)
    assert set(ours[0].metrics) == {'success_rate', 'mean_accuracy', 'miou_legacy'}
    # the table: official last epochs (5, 6, 7), selected (9, 10, 11), vs ours, CIs over 3 seeds
    assert '| SCHEMA (official, last epoch)† | ' in text
    assert re.search(r'SCHEMA \(official, its own selection\)†[^\n]*10\.00 ± ', text)
    assert re.search(r'\| Δ \| [+-]\d+\.\d\d\*? ± \d', text)
    assert 'ours' in text and 'x faster' in text
    assert (out / 'loss_curves.png').is_file() and (out / 'loss_curves.pdf').is_file()
    saved = json.loads((out / 'comparison.json').read_text())
    assert saved['runs']['official'][0]['losses']['state'] == [3.0, 1.5]
    # the checkout itself was not touched; its copy got our text features
    assert (tmp_path / 'SCHEMA/data/state_description_features/'
            'niv_state_prompt_features.npy').read_text() == ''
    copied = np.load(out / 'official_copy/data/state_description_features/'
                     'niv_state_prompt_features.npy')
    np.testing.assert_array_equal(copied, np.load(shared_data / 'niv/state_features_clip.npy'))
    # a rerun reuses every finished side (nothing trains again), other settings are refused
    capsys.readouterr()
    run_tool('--method', 'schema', '--official-dir', tmp_path / 'SCHEMA', '--epochs', 2,
             '--seeds', 0, 1, 2, '--out', out, '--data-root', shared_data, *SMALL)
    assert (out / 'comparison.md').read_text() == text
    assert 'seed 0' not in capsys.readouterr().err  # no side ran again
    assert 'epochs: 2 there, 3 now' in tool_error(
        '--method', 'schema', '--official-dir', tmp_path / 'SCHEMA', '--epochs', 3,
        '--seeds', 0, '--out', out, '--data-root', shared_data, *SMALL)


def test_different_windows_stop_the_comparison(shared_data, tmp_path, monkeypatch):
    """An official run that trained on other windows (here: the stand-in reports one fewer)
    is no comparison: exit 1 naming both counts before our side trains, no report written."""
    official = schema_stand_in(tmp_path)
    out = tmp_path / 'out'
    monkeypatch.setenv('STAND_IN_DROP', '1')
    message = tool_error('--method', 'schema', '--official-dir', official, '--epochs', 1,
                         '--seeds', 0, '--out', out, '--data-root', shared_data, *SMALL)
    assert "{'train': 696, 'test': 270} windows, ours {'train': 697, 'test': 270}" in message
    assert not (out / 'comparison.md').exists() and not (out / 'ours/seed0.json').exists()


def test_a_failing_official_run_is_named(shared_data, tmp_path):
    official = schema_stand_in(tmp_path)
    (official / 'main.py').write_text('import sys\nprint("no GPU found")\nsys.exit(3)\n')
    message = tool_error('--method', 'schema', '--official-dir', official, '--epochs', 1,
                         '--seeds', 0, '--out', tmp_path / 'out', '--data-root', shared_data)
    assert 'exited with status 3' in message and 'no GPU found' in message


def test_refuses_what_is_not_a_checkout(tmp_path):
    message = tool_error('--method', 'schema', '--official-dir', tmp_path, '--epochs', 1,
                         '--out', tmp_path / 'out')
    assert 'lacks' in message and 'WenliangGuo/SCHEMA' in message
    message = tool_error('--method', 'schema', '--official-dir', tmp_path, '--epochs', 1,
                         '--out', tmp_path / 'out', '--size', 'width=3')
    assert "'width'" in message and 'embed_dim' in message


def test_schema_log_reading_and_seconds():
    """Epoch seconds from the recorded times: training = from the end of the previous test
    pass (the first: from the window-count line) to the end of the training block."""
    lines = ['Training set volumn: 10 Testing set volumn: 4']
    for epoch in (1, 2):
        lines += [f'Epoch: {epoch} State Loss: 2.00 Top1 Acc: 1.00%', '\tAction Loss: 3.00, SR',
                  '\tTask Loss: 1.00, Acc1', '\tState Pred Loss: 0.50',
                  f'Epoch: {epoch} State Loss: 9.00 Top1 Acc: 1.00%', '\tAction Loss: 9.00',
                  f'\tViterbi, SR: {10 * epoch:.2f}% Acc: 20.00% MIoU: 30.00',
                  '\tTask Loss: 9.00', '\tState Pred Loss: 9.00']
    times = [0.0] + [1.0, 1, 1, 5.0, 5, 5, 5, 5, 7.0] + [8, 8, 8, 17.0, 17, 17, 17, 17, 20.0]
    run = read_schema_log(list(zip(times, lines)), 2, 0, 0.1)
    assert run.train_seconds == [5.0, 10.0] and run.eval_seconds == [2.0, 3.0]
    assert run.losses['total'] == pytest.approx([6.05, 6.05])
    assert run.metrics['success_rate'] == 20.0 and run.selected_epoch == 2
    with pytest.raises(ValueError, match='expected 3 of each'):
        read_schema_log(list(zip(times, lines)), 3, 0, 0.1)


def test_records_and_progress(tmp_path):
    path = tmp_path / 'r.jsonl'
    path.write_text('[1.5, "a"]\n[2.5, "b"]\n[3.0, "trunc')
    assert read_records(path) == [(1.5, 'a'), (2.5, 'b')]
    clock = iter([0.0, 10.0, 20.0, 21.0]).__next__
    progress = EpochProgress(4, clock=clock)
    progress.start('official')
    progress.epoch('official')  # 10 s per official epoch
    assert progress.eta_text() == ''  # ours not measured yet
    progress.start('ours')
    progress.epoch('ours')      # 1 s per epoch of ours
    assert progress.eta_text() == ' (eta 1 min)'  # 3 x 10 + 3 x 1 s


# ----------------------------------------------------------------------------- PDPP
# stand-ins of train_mlp.py, temp.py (with the two empty paths its README says to edit) and
# main_distributed.py: utils/args.py's flags, the TensorBoard tags the scripts log, the
# checkpoints the next stage reads; classifier loss 1/(e+1), diffusion loss 2/(e+1) + seed/10,
# test SR per 5 epochs [20, 10, ...] + seed (best: epoch 5)
PDPP_ARGS = textwrap.dedent('''
    import argparse, os, sys, time
    from torch.utils.tensorboard import SummaryWriter  # the official's tensorboardX stores
    # 'Val/EpochAcc@1' as 'Val/EpochAcc_1': the stand-ins write that name
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


def test_pdpp_against_a_stand_in(shared_data, tmp_path, monkeypatch):
    official = pdpp_stand_in(tmp_path)
    out = tmp_path / 'out'
    # both sides small: U-Net width 32 (a patch of the official script), 48-d frames
    run_tool('--method', 'pdpp', '--official-dir', official, '--epochs', 10, '--seeds', 1, 2,
             '--out', out, '--data-root', shared_data, '--size', 'batch_size=4',
             '--size', 'n_train_steps=1', '--size', 'unet_dim=32', '--frame-dim', 48)
    text = (out / 'comparison.md').read_text()
    for change in ('--epochs 10 (README, NIV: 130)', '--batch_size 4 (README, NIV: 256)',
                   'temp.py: its checkpoint path', 'one-process gloo group',
                   '--num_thread_reader 2', "[patch] main_distributed.py: the temporal U-Net's "
                   'hard-coded dim=256 set to 32 (size unet_dim; ours: model.dim=32)'):
        assert change in text, change
    assert '--unet_dim' not in text  # not a flag of the official script
    assert 'UNET = dict(dim=32, ' in (out / 'official_copy/main_distributed.py').read_text()
    assert 'UNET = dict(dim=256, ' in (official / 'main_distributed.py').read_text()
    assert '--observation_dim 144 ' in (out / 'official/seed1/classifier.command.txt').read_text()
    our_config = next((out / 'ours').rglob('pdpp_niv_t3.py')).read_text()
    assert 'feature_dim=144' in our_config and 'dim=32' in our_config
    runs = {s: SideRun.load(out / f'official/seed{s}.json') for s in (1, 2)}
    ours = SideRun.load(out / 'ours/seed1.json')
    assert runs[1].losses['total'] == pytest.approx([2 / (e + 1) + 0.1 for e in range(10)])
    assert runs[2].metrics == pytest.approx(dict(success_rate=12, mean_accuracy=24,
                                                 miou_set=36))
    assert runs[2].selected_epoch == 5 and runs[2].selected['success_rate'] == 22
    classifier = runs[1].stages['classifier']
    assert classifier['losses'] == pytest.approx([1 / (e + 1) for e in range(10)])
    assert (classifier['accuracy'], classifier['selected_accuracy'],
            classifier['selected_epoch']) == (90.0, 95.0, 2)
    assert len(runs[1].eval_seconds) == 2 and len(runs[1].train_seconds) == 10
    # ours: the same windows, its classifier's loss per epoch (1 step each), the test metrics
    assert runs[1].windows == ours.windows == dict(train=697, test=270)
    assert len(ours.stages['classifier']['losses']) == 10 and len(ours.losses['total']) == 10
    assert set(ours.metrics) == {'success_rate', 'mean_accuracy', 'miou_set'}
    assert 'pre-stage classifier' in text and 'last epoch 90.00%' in text
    # the patch went into the copy only
    assert 'VPN_PDPP_CLASSIFIER' in (out / 'official_copy/temp.py').read_text()
    assert 'torch.load("",' in (official / 'temp.py').read_text()
    assert tool_error('--method', 'pdpp', '--official-dir', official, '--epochs', 7,
                      '--out', tmp_path / 'other').endswith(
        'give a multiple of 5 so that its last epoch is tested\n(set VPN_TRACEBACK=1 for the '
        'traceback)')


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


def test_kepp_against_a_stand_in(shared_data, tmp_path, monkeypatch):
    official = kepp_stand_in(tmp_path)
    out = tmp_path / 'out'
    smaller_ours(monkeypatch, 'kepp', **{'model.dim': 32})  # U-Net width 32
    run_tool('--method', 'kepp', '--official-dir', official, '--epochs', 10, '--horizon', 4,
             '--seeds', 3, '--out', out, '--data-root', shared_data, '--size', 'batch_size=4',
             '--size', 'n_train_steps=1')
    text = (out / 'comparison.md').read_text()
    for change in ('step/inference.py: its checkpoint path', 'PKG/graph_creation.py',
                   'kepp_action_list.txt', '--epochs 10'):
        assert change in text, change
    run, ours = SideRun.load(out / 'official/seed3.json'), SideRun.load(out / 'ours/seed3.json')
    assert run.losses['total'] == pytest.approx([3 / (e + 1) for e in range(10)])
    assert run.metrics['success_rate'] == 13 and run.selected_epoch == 5
    step = run.stages['step_model']
    assert step['losses'] == pytest.approx([5 / (e + 1) for e in range(10)])
    assert (step['accuracy'], step['selected_accuracy'], step['selected_epoch']) == (60, 40, 5)
    # the stand-in's graph is KEPP's counting: ours (build_graph) is the same, edge for edge
    graph = run.stages['graph']
    assert graph['identical_structure'] and graph['max_weight_difference'] < 1e-12
    assert graph['edges'] == graph['ours_edges'] > 0
    assert run.windows == ours.windows and ours.windows['train'] > 0
    assert len(ours.stages['step_model']['losses']) == 10
    assert 'pre-stage step_model' in text and 'identical_structure True' in text
    assert tool_error('--method', 'kepp', '--official-dir', official, '--epochs', 5,
                      '--out', tmp_path / 'other').startswith(
        'error: --horizon 3: the official KEPP retrieves paths of 4 actions only')


def official_weights(checkpoint: Path, out: Path) -> None:
    """Our trained KEPP ``checkpoint`` written as the official ``save_checkpoint`` files of its
    step and plan models (``GaussianDiffusion`` state dicts, PDPP's names under
    ``module.model.``) in ``out``: the weights our test scores (mmengine's EMA, saved as
    ``state_dict``) as ``ema``, zeros as ``model`` (the official validation samples with
    ``ema``: so must ours)."""
    import torch
    from vpn_plugin.engine.checkpoint import read_checkpoint
    from vpn_plugin.models.temporal_unet import official_name
    scored = read_checkpoint(str(checkpoint))['state_dict']
    for model in ('step', 'plan'):
        prefix = f'{model}.unet.'
        weights = {'module.model.' + official_name(k[len(prefix):]): v.clone()
                   for k, v in scored.items() if k.startswith(prefix)}
        assert len(weights) > 100
        torch.save(dict(ema=weights, model={k: torch.zeros_like(v) for k, v in weights.items()},
                        epoch=10), out / f'{model}.pth.tar')


def test_kepp_rescored_with_our_evaluator(shared_data, tmp_path, monkeypatch):
    """--rescore-with-ours loads the kept official weights into our model and scores them with
    our evaluator. The oracle: official weights that are our own trained weights of the other
    seed (official seed 3 <- our seed 4, seed 4 <- our seed 3) score exactly what our side
    scored for that seed (the evaluator's sampling noise is the model's sampling_seed, not the
    run's seed); had the conversion kept our template's weights, taken the official 'model'
    weights (zeros) or crossed step and plan, the seeds would not swap."""
    official = kepp_stand_in(tmp_path)
    out = tmp_path / 'out'
    # 10 diffusion steps instead of NIV's 50: the weights' route is under test, not sampling
    smaller_ours(monkeypatch, 'kepp', **{'model.dim': 32, 'model.n_timesteps': 10})
    args = ['--method', 'kepp', '--official-dir', official, '--epochs', 5, '--horizon', 4,
            '--seeds', 3, 4, '--out', out, '--data-root', shared_data, '--size',
            'batch_size=4', '--size', 'n_train_steps=2']
    run_tool(*args)
    kept = {s: out / f'official/seed{s}/checkpoints' for s in (3, 4)}
    assert all((kept[s] / f'{m}.pth.tar').is_file() for s in (3, 4) for m in ('step', 'plan'))
    ours = {s: SideRun.load(out / f'ours/seed{s}.json') for s in (3, 4)}
    assert ours[3].metrics != ours[4].metrics  # the two seeds' models are told apart
    for seed, other in ((3, 4), (4, 3)):
        checkpoint = next((out / 'ours').rglob(f'seed{other}_*/epoch_5.pth'))
        official_weights(checkpoint, kept[seed])
    text = run_tool(*args, '--rescore-with-ours')
    rescored = {s: SideRun.load(out / f'official/seed{s}.rescored.json') for s in (3, 4)}
    assert rescored[3].metrics == pytest.approx(ours[4].metrics, abs=1e-9)
    assert rescored[4].metrics == pytest.approx(ours[3].metrics, abs=1e-9)
    assert rescored[3].side == 'official (our evaluator)'
    assert rescored[3].losses == SideRun.load(out / 'official/seed3.json').losses
    assert 'both trainings scored by our evaluator' in text
    assert 'KEPP (official, our evaluator)' in text and 'the evaluator alone' in text
    assert len(json.loads((out / 'comparison.json').read_text())['rescored']) == 2
    # runs made before the weights were kept are named, with the fix
    for path in kept[3].iterdir():
        path.unlink()
    (out / 'official/seed3.rescored.json').unlink()
    assert 'were not kept (runs made before they were); delete' in tool_error(
        *args, '--rescore-with-ours')
    assert "cannot load the official weights into our model yet" in tool_error(
        '--method', 'schema', '--official-dir', schema_stand_in(tmp_path), '--epochs', 1,
        '--out', tmp_path / 'schema', '--data-root', shared_data, '--rescore-with-ours')


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


def test_cefito_against_a_stand_in(shared_data, tmp_path, monkeypatch):
    official = cefito_stand_in(tmp_path)
    out = tmp_path / 'out'
    smaller_ours(monkeypatch, 'cefito', **{'model.hidden_dim': 32, 'model.num_heads': 2,
                                           'model.num_negatives': 4})
    run_tool('--method', 'cefito', '--official-dir', official, '--epochs', 6, '--seeds', 2,
             '--out', out, '--data-root', shared_data, '--size', 'classifier_epochs=3',
             '--official-variant', 'oracle_task')
    text = (out / 'comparison.md').read_text()
    for change in ('train.epochs=6 (niv_t3.yaml: 200)', 'eval.oracle_task=false',
                   'task_classifier.epochs=3', 'MiniLM stand-in',
                   '[variant] oracle_task: scripts/train.py rerun with --set '
                   'eval.oracle_task=true'):
        assert change in text, change
    # the official defect switched back on: train.py rerun planning with the true task
    oracle = SideRun.load(out / 'official/seed2.oracle_task.json')
    assert oracle.metrics == pytest.approx(dict(success_rate=27, mean_accuracy=54,
                                                miou_legacy=81))
    assert oracle.stages['check']['max_loss_difference_to_main_run'] == pytest.approx(0)
    assert 'eval.oracle_task=true' in (out / 'official/seed2/train_oracle_task.command.txt'
                                       ).read_text()
    table = text.split('official variant oracle_task against')[1]
    assert re.search(r'\| CEFITO \(official, oracle_task\)†? \| \**27\.00', table), table
    assert re.search(r'\| Δ \| \+5\.00', table), table
    run, ours = SideRun.load(out / 'official/seed2.json'), SideRun.load(out / 'ours/seed2.json')
    assert run.losses['total'] == pytest.approx([4 / e + .02 for e in range(1, 7)], abs=1e-4)
    assert run.metrics['success_rate'] == 22 and run.selected_epoch == 3
    assert run.windows == ours.windows == dict(train=697, test=270)
    classifier = run.stages['classifier']
    assert classifier['losses'] == pytest.approx([1, 1 / 2, 1 / 3], abs=1e-4)
    assert (classifier['accuracy'], classifier['selected_accuracy'],
            classifier['selected_epoch']) == (85, 90, 2)
    assert len(ours.stages['classifier']['losses']) == 3 and len(ours.losses['total']) == 6
    assert tool_error('--method', 'cefito', '--official-dir', official, '--epochs', 4,
                      '--out', tmp_path / 'other').startswith('error: --epochs 4: the official')
    assert 'runs with 512-d frames only' in tool_error(
        '--method', 'cefito', '--official-dir', official, '--epochs', 6, '--frame-dim', 64,
        '--out', tmp_path / 'other')
    assert "--official-variant ['oracle']: not a variant of the CEFITO comparison; expected " \
           "one of ['oracle_task']" in tool_error(
               '--method', 'cefito', '--official-dir', official, '--epochs', 6,
               '--official-variant', 'oracle', '--out', tmp_path / 'other')


def test_loss_figure_legend_is_clear_of_every_panel(tmp_path, monkeypatch):
    """The legend sits above the first panel: KEPP's curves (a spike after the warm-up) ran
    under a legend placed inside it."""
    from vpn_plugin.protocol import plots
    from vpn_plugin.protocol.official import summary
    drawn = {}
    monkeypatch.setattr(plots, 'save_figure', lambda fig, stem: drawn.setdefault('fig', fig))

    def run(side, seed, scale):
        curve = [200, 1800, 1700 + 10 * seed, 700, 400]
        return SideRun(side, seed, dict(total=[scale * v for v in curve]), [1.0] * 5, {},
                       {}, stages=dict(step_model=dict(losses=curve[::-1], seconds=[1.0] * 5)))
    runs = {side: [run(side, s, 1 + 0.1 * (side == 'ours')) for s in range(3)]
            for side in ('official', 'ours')}
    summary.plot_losses('KEPP', runs, tmp_path / 'figure')
    fig = drawn['fig']
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend, = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_ylabel()
    assert box.y0 >= fig.axes[0].get_window_extent(renderer).y1
