"""What the rows of a table or figure were trained and tested on (``ResultRow.features``).

One rule for tables (``report.py``) and figures (``plots.py``):

* every caption names the feature source of each dataset (:func:`features_note`);
* methods with rows on synthetic features carry :data:`SYNTHETIC_MARK`, on unusable ones
  (S3D with random weights) :data:`UNUSABLE_MARK`, as shortened runs carry ``†``
  (:func:`feature_marks`);
* rows of one dataset on different feature sources are refused (:func:`check_feature_mix`)
  unless asked for (``--allow-mixed-features``); planners that read no features (LLM prompts,
  ``kind`` ``none``) mix with any. Rows that recorded no source (written before the field
  existed) are a source of their own: "not recorded".
"""
from __future__ import annotations

from vpn_plugin.datasets.provenance import UNUSABLE_KINDS, combine

SYNTHETIC_MARK = '‖'
UNUSABLE_MARK = '✗'  # '¶' marks a missing row (report --allow-missing)
NOT_RECORDED = 'not recorded in the rows'


def record_kinds(record: dict) -> set:
    """Every kind a record holds: its own, its parts' (union datasets, averaged rows), the
    training's (``trained_on``) and a converted folder's source (``source``)."""
    kinds = {record.get('kind', '')}
    for part in record.get('parts', []):
        kinds |= record_kinds(part)
    for inner in ('trained_on', 'source'):
        if isinstance(record.get(inner), dict):
            kinds |= record_kinds(record[inner])
    return kinds


def source_key(record: dict) -> str:
    """What identifies a feature source: the fingerprint(s) of what the run trained and
    tested on ('' = not recorded)."""
    if not record:
        return ''
    trained = record.get('trained_on') or {}
    return f'{record.get("kind")}:{record.get("fingerprint")}' + \
        (f'<-{trained.get("fingerprint")}' if trained else '')


def source_label(record: dict) -> str:
    return record.get('label', NOT_RECORDED) if record else NOT_RECORDED


def reads_features(record: dict) -> bool:
    return record.get('kind') != 'none'


def sources_by_dataset(rows) -> dict:
    """``{dataset: {source key: (label, {method: [seeds]})}}`` of the rows that read
    features."""
    found = {}
    for row in rows:
        if not reads_features(row.features):
            continue
        by_source = found.setdefault(row.dataset, {})
        label, methods = by_source.setdefault(source_key(row.features),
                                              (source_label(row.features), {}))
        methods.setdefault(row.method, []).append(row.seed)
    return found


def check_feature_mix(rows, allow: bool = False) -> None:
    """Refuse rows of one dataset on several feature sources (each named with its methods
    and seeds), unless ``allow``."""
    if allow:
        return
    for dataset, sources in sources_by_dataset(rows).items():
        if len(sources) > 1:
            alike = len({label for label, _ in sources.values()}) < len(sources)
            listed = '; '.join(  # labels alike (a record edited by hand): the keys tell apart
                f'{label}{f" [{key}]" if alike else ""} '
                f'({", ".join(f"{m} seeds {sorted(s)}" for m, s in methods.items())})'
                for key, (label, methods) in sources.items())
            raise ValueError(f'the rows of dataset {dataset!r} were trained or tested on '
                             f'{len(sources)} feature sources: {listed}. A table or figure '
                             'compares rows of one source: keep one (--methods, --protocol), '
                             'or pass --allow-mixed-features and the caption names each')


def feature_marks(rows) -> dict:
    """``{method: marks}``: :data:`SYNTHETIC_MARK` for synthetic features,
    :data:`UNUSABLE_MARK` for unusable ones ('' = neither)."""
    marks = {}
    for row in rows:
        kinds = record_kinds(row.features)
        text = marks.get(row.method, '')
        if 'synthetic' in kinds and SYNTHETIC_MARK not in text:
            text += SYNTHETIC_MARK
        if kinds & set(UNUSABLE_KINDS) and UNUSABLE_MARK not in text:
            text += UNUSABLE_MARK
        marks[row.method] = text
    return {m: ''.join(sorted(t, key=(SYNTHETIC_MARK + UNUSABLE_MARK).index))
            for m, t in marks.items()}


def features_note(rows, dataset_labels: dict | None = None) -> str:
    """The caption's sentences on features: the source of each dataset (with its methods
    when a dataset has several), then what the marks mean."""
    dataset_labels = dataset_labels or {}
    found = sources_by_dataset(rows)
    parts = []
    for dataset, sources in found.items():
        name = dataset_labels.get(dataset, dataset) or 'rows'
        if len(sources) == 1:
            (label, _), = sources.values()
            parts.append(f'{name}: {label}' if len(found) > 1 else label)
        else:
            parts.append(f'{name}: ' + '; '.join(f'{label} ({", ".join(methods)})'
                                                 for label, methods in sources.values()))
    featureless = {}
    for row in rows:
        if not reads_features(row.features):
            featureless.setdefault(source_label(row.features), []).append(row.method)
    parts += [f'{", ".join(dict.fromkeys(methods))}: {label}'
              for label, methods in featureless.items()]
    text = f'Features: {" | ".join(parts)}.' if parts else ''
    kinds = set().union(*(record_kinds(r.features) for r in rows)) if rows else set()
    return f'{text} {marks_note(kinds)}'.strip()


def marks_note(kinds: set) -> str:
    """What the feature marks of these kinds mean."""
    text = ''
    if 'synthetic' in kinds:
        text += (f' {SYNTHETIC_MARK} synthetic features: a check of the pipeline, not a '
                 'result on real videos.')
    if kinds & set(UNUSABLE_KINDS):
        text += (f' {UNUSABLE_MARK} UNUSABLE features (S3D with random weights): these '
                 'numbers mean nothing.')
    return text.strip()


def record_note(record: dict) -> str:
    """The note of one model's features (a qualitative figure): the label, and a warning
    when they are synthetic or unusable."""
    kinds = record_kinds(record)
    warning = ('synthetic: a check of the pipeline, not a result on real videos'
               if 'synthetic' in kinds else '')
    if kinds & set(UNUSABLE_KINDS):
        warning = 'UNUSABLE (S3D with random weights): this output means nothing'
    return f'Features: {source_label(record)}' + (f' ({warning}).' if warning else '.')


def averaged_features(records: list) -> dict:
    """The ``features`` of a row averaged over datasets: one record of its parts' (empty,
    not recorded, when no part has one; a part without one is named 'not recorded' beside the
    others, whose kinds, e.g. synthetic, still mark the row)."""
    if not any(records):
        return {}
    return combine([record or dict(kind='', label='not recorded') for record in records])
