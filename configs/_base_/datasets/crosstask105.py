# CrossTask with the merged 105-action taxonomy (steps shared across tasks merged; MTID's
# setting, supplementary "Comparison with MTID"): the same windows as crosstask.py, read and
# checked in the 133-action taxonomy their CSV step numbers index (annotation_taxonomy), then
# relabelled by action name into taxonomy_105.json, as the ViterbiPlanNet authors'
# create_split.py makes their *_105.json files.
_base_ = ['./crosstask.py']
_taxonomy_105 = dict(taxonomy='taxonomy_105.json', annotation_taxonomy='taxonomy_133.json')
train_dataloader = dict(dataset=_taxonomy_105)
val_dataloader = dict(dataset=_taxonomy_105)
test_dataloader = dict(dataset=_taxonomy_105)
