"""The home page's task-family table names every registered task, with its agent count."""

import re

from helpers import REPO_ROOT

from powerzoo.tasks import list_tasks, task_spec


def test_the_family_table_links_every_task_and_its_agent_range_holds():
    page = (REPO_ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    table = page[page.index("## Task families") :].split("\n\n")[1]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    linked: dict[str, str] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for task in re.findall(r"\[`(\w+)`\]\(tasks/\1\.md\)", cells[1]):
            linked[task] = cells[2]
    assert sorted(linked) == sorted(list_tasks())
    for task, agents in linked.items():
        n = len(task_spec(task).agents)
        bounds = [int(x) for x in re.findall(r"\d+", agents)]
        if " to " in agents:
            assert bounds[0] <= n <= bounds[1], (task, agents, n)
        else:
            assert n in bounds, (task, agents, n)


def test_the_site_navigation_lists_every_task_page():
    import yaml

    nav = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    tasks = next(item["Tasks"] for item in nav if isinstance(item, dict) and "Tasks" in item)
    pages = {p for p in tasks if isinstance(p, str) and re.fullmatch(r"tasks/\w+\.md", p)}
    assert pages == {"tasks/index.md"} | {f"tasks/{t}.md" for t in list_tasks()}
