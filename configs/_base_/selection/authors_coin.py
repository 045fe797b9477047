# The authors' model selection on coin (their scripts/run_*.sh + main.py): train on ALL
# training videos (no held-out part), validate on the official TEST windows every epoch and
# keep the checkpoint with the best success rate of the evaluated decoding (the paper's
# numbers; ties broken by (mAcc + mIoU) / 2 as theirs: planners/vpn_*_authors.py). Test-set selection:
# report it as such. The default ('unified', the dataset base alone) selects on held-out
# training videos and never looks at the test windows before testing.
_base_ = ['../datasets/coin.py']
selection = 'authors'
train_dataloader = dict(dataset=dict(val_fraction=0.0))
val_dataloader = dict(dataset=dict(split='test', annotation_file='annotations/coin_test_30.json',
                                   other_split='annotations/coin_train_70.json'))
