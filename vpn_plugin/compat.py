"""Placeholder: replaced by the compatibility module (issue 2)."""


def apply():
    pass
