"""The step trainer: SB3 training and evaluation advanced one env step at a time by the caller."""
