"""Windows -> the unified protocol's window format (library of tools/export_windows.py).

One record per window, fields in the order of the official files (``../shared/data``
README, "Window format")::

    {"id": {["vid",] ["task",] "feature": "<prefix><stem>.npy",
            "legal_range": [[start_s, end_s, action_id], ... T rows],
            "task_id", "task_name", "actions": [T names]},
     "instruction_len": <steps in the video>}

Which of ``vid`` / ``task`` (the task key, e.g. CrossTask's '23521') a dataset's files carry
and the folder their ``feature`` paths name (where the authors kept their features; only the
file name matters to a loader) are in ``WINDOW_LAYOUTS``. Written with ``json.dump(indent=4)``
as the authors' ``create_split.py``, so an export can equal an official file byte for byte.
"""
import json
from typing import List, Sequence

from .annotations import Window
from .taxonomy import Taxonomy
from ..errors import write_text_atomically
from ..tool_choices import WINDOW_LAYOUTS


def window_record(window: Window, taxonomy: Taxonomy, fields: Sequence[str] = ('vid', 'task'),
                  prefix: str = '') -> dict:
    """The unified-protocol record (module docstring) of one window."""
    meta = {}
    if 'vid' in fields:
        meta['vid'] = window.vid
    if 'task' in fields:
        meta['task'] = taxonomy.task_keys[window.task]
    meta.update(feature=f'{prefix}{window.feature}.npy',
                legal_range=[[s, e, a] for (s, e), a in zip(window.times, window.steps)],
                task_id=window.task, task_name=taxonomy.task_names[window.task],
                actions=[taxonomy.action_names[a] for a in window.steps])
    return {'id': meta, 'instruction_len': window.video_num_steps}


def write_window_file(path, windows: Sequence[Window], taxonomy: Taxonomy, layout: str,
                      prefix=None) -> List[dict]:
    """Write ``windows`` to ``path`` in ``WINDOW_LAYOUTS[layout]`` (``prefix``: the feature
    folder, default the layout's; a folder given without its trailing '/' gets one: 'feats'
    wrote 'featscoffee_0001.npy'); returns the records."""
    if layout not in WINDOW_LAYOUTS:
        raise ValueError(f'layout {layout!r}; expected one of {sorted(WINDOW_LAYOUTS)}')
    spec = WINDOW_LAYOUTS[layout]
    prefix = spec['prefix'] if prefix is None else prefix
    if prefix and not prefix.endswith('/'):
        prefix += '/'
    records = [window_record(w, taxonomy, spec['fields'], prefix) for w in windows]
    write_text_atomically(path, json.dumps(records, indent=4), 'window file')
    return records
