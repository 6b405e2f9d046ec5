"""Every registered task documents itself in the same sections, in the same order."""

import pytest

from powerzoo.benchmarks.task_pages import (
    REQUIRED_SECTIONS,
    SECTION_ORDER,
    docstring_sections,
    task_doc,
)
from powerzoo.tasks import get_task_class, list_tasks
from powerzoo.tasks.base import Task


@pytest.mark.parametrize("name", list_tasks())
def test_every_task_has_every_section_in_order(name):
    preset, sections = task_doc(name)
    missing = [s for s in REQUIRED_SECTIONS if not sections.get(s)]
    assert not missing, f"{name}: docstring lacks section(s) {missing}"
    assert list(sections) == [s for s in SECTION_ORDER if s in sections]
    for cls in get_task_class(name).__mro__:
        if issubclass(cls, Task) and cls is not Task:
            docstring_sections(cls.__dict__.get("__doc__"))  # raises on disorder or unknown


def test_the_parser_rejects_a_missing_order_or_an_unknown_section():
    with pytest.raises(ValueError, match="out of order"):
        docstring_sections("Summary.\n\n## Action\nx\n\n## Description\ny\n")
    with pytest.raises(ValueError, match="unknown section 'Rewards'"):
        docstring_sections("Summary.\n\n## Description\nx\n\n## Rewards\ny\n")
    preamble, sections = docstring_sections("Summary.\n\n## Description\nx\n")
    assert preamble == "Summary." and sections == {"Description": "x"}


def test_a_preset_shares_its_class_sections_with_a_preset_paragraph():
    preset, sections = task_doc("opf_118")
    assert preset.startswith("Preset `opf_118`")
    assert sections["Description"] == task_doc("marl_opf")[1]["Description"]
