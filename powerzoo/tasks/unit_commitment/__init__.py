"""Unit-commitment tasks ``marl_uc`` (case5) and ``tso`` (case118): model in :mod:`.task`, specs in
:mod:`.spec`, the day-ahead UC MILP oracle in :mod:`.oracle`."""

from powerzoo.tasks.unit_commitment.task import MarlUc, Tso, UCState, UnitCommitment

__all__ = ["MarlUc", "Tso", "UCState", "UnitCommitment"]
