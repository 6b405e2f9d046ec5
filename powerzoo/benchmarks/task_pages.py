"""One page per task, built from its spec, its class docstring and the packaged baselines.

A task's class docstring is written in sections, Gymnasium style: Markdown headings
``## Description``, ``## Action``, ``## Observation``, ``## Reward``, ``## Costs``,
``## Starting state``, ``## Episode end`` and ``## Arguments`` (:data:`REQUIRED_SECTIONS`, in
that order), with the optional ``## Model`` after the description and ``## Baselines`` and
``## Reference`` at the end. A preset class (``opf_118`` on the dispatch model) may give only
the sections that differ: the rest come from its nearest parent class that has them, and its
own text before the first heading becomes the page's preset paragraph.

:func:`task_sections` assembles the page once, as titled blocks of paragraphs and tables;
:func:`render_markdown` writes it as a Markdown page (``powerzoo docs-pages``) and
:func:`render_text` as plain text (``powerzoo describe``), so the two read alike.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

from powerzoo.benchmarks.card_text import card_markdown
from powerzoo.benchmarks.catalog import baseline_numbers
from powerzoo.benchmarks.evaluation import return_unit
from powerzoo.benchmarks.task_arguments import arguments_table
from powerzoo.benchmarks.task_training import training_blocks
from powerzoo.data import calendar
from powerzoo.tasks import get_task_class, list_tasks, task_spec
from powerzoo.tasks.base import Task

__all__ = [
    "REQUIRED_SECTIONS",
    "SECTION_ORDER",
    "Section",
    "docstring_sections",
    "task_doc",
    "task_sections",
    "render_markdown",
    "render_text",
    "index_page",
    "PHYSICS",
]

REQUIRED_SECTIONS = (
    "Description",
    "Action",
    "Observation",
    "Reward",
    "Costs",
    "Starting state",
    "Episode end",
    "Arguments",
)
"""The sections every task's class docstring gives (itself or through a parent class)."""
SECTION_ORDER = (
    "Description",
    "Model",
    *REQUIRED_SECTIONS[1:],
    "Baselines",
    "Reference",
)
"""Every section a task docstring may have, in the order it must give them."""

PHYSICS = {
    "battery_arbitrage": "none (price taker)",
    "dc_microgrid": "site power balance",
    "dc_microgrid_safe": "site power balance",
    "dc_scheduling": "AC radial power flow (33-bus)",
    "dso": "AC radial power flow (33-bus)",
    "marl_der_arbitrage": "AC radial power flow (33-bus)",
    "marl_ders_benchmark": "AC radial power flow (141-bus)",
    "marl_ev_v2g": "AC radial power flow (33-bus)",
    "lv_unbalance": "three-phase unbalanced power flow (European LV feeder)",
    "volt_var_123": "three-phase unbalanced power flow (IEEE 123-node feeder)",
    "marl_opf": "DC power flow (5-bus)",
    "opf_118": "DC power flow (118-bus)",
    "opf_118_7d": "DC power flow (118-bus)",
    "opf": "DC power flow (any case)",
    "acopf_118": "AC power flow (118-bus)",
    "voltage_control_118": "AC power flow (118-bus)",
    "gencos_bidding": "DC-OPF market clearing (5-bus)",
    "marl_uc": "DC power flow (5-bus)",
    "tso": "DC power flow (118-bus)",
    "joint_trans_dist": "DC (5-bus) + AC radial (33-bus)",
    "joint_trans_dist_7d": "DC (5-bus) + AC radial (33-bus)",
    "joint_trans_dist_118": "DC (118-bus) + AC radial (33, 33, 33-bus)",
}
"""The network model each built-in task steps, for the catalogue."""

MAX_TABLE_ROWS = 60  # longer vectors (tso: 108 actions) are cut, with a row saying how many more

_HEADING = re.compile(r"^## +(.+?) *$", re.MULTILINE)
_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj):`~?\.?([^`]+)`")


@dataclasses.dataclass
class Section:
    """One titled block of a task page: paragraphs (Markdown text) and tables, in order.

    ``blocks`` holds strings (paragraphs) and ``(header, rows)`` tuples (tables).
    """

    title: str
    blocks: list[Any] = dataclasses.field(default_factory=list)


def _clean(text: str) -> str:
    """Docstring text as Markdown: Sphinx roles and double back-quotes become code spans."""
    text = _ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    return text.replace("``", "`")


def docstring_sections(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(preamble, {title: text})`` of a docstring written in ``## Title`` sections.

    The preamble is the text before the first heading. ``ValueError`` names a section that is
    not one of :data:`SECTION_ORDER`, a repeated one, or sections out of that order.
    """
    doc = inspect.cleandoc(doc or "")
    parts = _HEADING.split(doc)
    preamble, sections = parts[0].strip(), {}
    titles = parts[1::2]
    for title, body in zip(titles, parts[2::2], strict=True):
        if title not in SECTION_ORDER:
            raise ValueError(f"unknown section {title!r}; sections: {', '.join(SECTION_ORDER)}")
        if title in sections:
            raise ValueError(f"section {title!r} appears twice")
        sections[title] = body.strip()
    positions = [SECTION_ORDER.index(t) for t in titles]
    if positions != sorted(positions):
        raise ValueError(
            f"sections out of order: {', '.join(titles)}; the order is {', '.join(SECTION_ORDER)}"
        )
    return preamble, sections


def task_doc(name: str) -> tuple[str, dict[str, str]]:
    """``(preset, sections)`` of task ``name``: its class's docstring sections, the missing ones
    taken from the nearest parent task class that has them (Markdown text).

    ``preset`` is the preamble of the task's own class when that class inherits sections (the
    preset paragraph), else ``""``. A class without sections (a task of your own written
    without them) gives its whole docstring as the description.
    """
    chain = [c for c in get_task_class(name).__mro__ if issubclass(c, Task) and c is not Task]
    preamble, own = docstring_sections(chain[0].__dict__.get("__doc__"))
    merged = dict(own)
    for cls in chain[1:]:
        for title, text in docstring_sections(cls.__dict__.get("__doc__"))[1].items():
            merged.setdefault(title, text)
    if not merged:
        merged, preamble = {"Description": inspect.getdoc(chain[0]) or ""}, ""
    preset = preamble if set(own) != set(merged) else ""
    ordered = {t: _clean(merged[t]) for t in SECTION_ORDER if t in merged}
    return _clean(preset), ordered


# ---- the page's content ------------------------------------------------------------------
def _fmt(value: float) -> str:
    return f"{value:g}" if abs(value) != float("inf") else ("inf" if value > 0 else "-inf")


def _vector_rows(names: tuple, units: tuple, low: tuple, high: tuple, prefix: str = "") -> list:
    rows = [
        [f"`{n.removeprefix(prefix)}`", u, _fmt(lo), _fmt(hi)]
        for n, u, lo, hi in zip(names, units, low, high, strict=True)
    ]
    if len(rows) > MAX_TABLE_ROWS:
        more = len(rows) - MAX_TABLE_ROWS
        rows = rows[:MAX_TABLE_ROWS] + [[f"... {more} more", "", "", ""]]
    return rows


def _action_tables(spec: Any) -> list[Any]:
    header = ["entry", "unit", "low", "high"]
    if spec.agent_mode == "single":
        a = spec.action
        return [(header, _vector_rows(a.names, a.units, a.low, a.high))]
    blocks: list[Any] = []
    d = spec.agent_action_dim
    for group in spec.groups:
        agent = group.agents[0]
        i = spec.agents.index(agent)
        part = slice(i * d, (i + 1) * d)
        a = spec.action
        blocks.append(
            f"Group `{group.name}` ({len(group.agents)} agents: "
            f"{', '.join(group.agents[:6])}{', ...' if len(group.agents) > 6 else ''}); "
            f"the entries of `{agent}` (every agent has {d}; bounds differ per agent where "
            "their ratings do):"
        )
        rows = _vector_rows(
            a.names[part], a.units[part], a.low[part], a.high[part], prefix=f"{agent}."
        )
        blocks.append((header, rows))
    return blocks


def _split_rows(spec: Any, episode_days: int) -> list[list[str]]:
    rows = []
    for split in spec.splits:
        try:
            n = calendar.split_day_indices(split, episode_days).size
        except ValueError:  # a task's own stress split, run on the test days
            n = calendar.split_day_indices("test", episode_days).size
        kind = "date split" if split in ("train", "val", "test") else "stress split (test days)"
        rows.append([f"`{split}`", kind, str(n)])
    return rows


def _baseline_rows(name: str, spec: Any) -> list[list[str]]:
    numbers = baseline_numbers(name)
    rows = []
    for policy in spec.baselines:
        row = numbers.get(policy)
        if row is None:
            rows.append([f"`{policy}`", "-", "-", "-"])
        else:
            mean, std = f"{row['mean']:,.2f}", f"{row['std']:,.2f}"
            rows.append([f"`{policy}`", row["split"], mean, std])
    return rows


def _example(name: str, spec: Any) -> str:
    if spec.agent_mode == "single":
        body = (
            f'env = make_env("{name}", split="test")\n'
            "obs, info = env.reset(seed=0)\n"
            "obs, reward, terminated, truncated, info = env.step(env.action_space.sample())\n"
            'print(reward, info["constraint_costs"])'
        )
    else:  # the PettingZoo Parallel env, one whole episode of random actions
        body = (
            f'env = make_env("{name}", framework="pettingzoo", split="test", seed=0)\n'
            "observations, infos = env.reset(seed=0)\n"
            "team_return = 0.0\n"
            "while env.agents:\n"
            "    actions = {agent: env.action_space(agent).sample() for agent in env.agents}\n"
            "    observations, rewards, terminations, truncations, infos = env.step(actions)\n"
            "    team_return += sum(rewards.values())\n"
            'print(team_return, infos[env.possible_agents[0]]["constraint_costs"])'
        )
    return "from powerzoo.rl import make_env\n\n" + body


def task_sections(name: str, figure: str | None = None, example: bool = True) -> list[Section]:
    """The page of task ``name`` as titled blocks, in page order.

    ``figure``: relative path of the figure of one test day under the rule-based policy (a
    ``Figure`` section shows it when given); ``example``: add the runnable ``make_env`` example
    (a ``("python", code)`` block). Raises ``ValueError`` for an unknown task.
    """
    spec = task_spec(name)
    cls = get_task_class(name)
    preset, doc = task_doc(name)
    episode_days = -(-spec.horizon * spec.step_minutes // (24 * 60))
    n = len(spec.agents)
    kind = "single-agent" if n == 1 else f"multi-agent, {n} agents"
    facts = [
        ["kind", kind],
        ["horizon", f"{spec.horizon} steps x {spec.step_minutes} min ({episode_days} day(s))"],
        ["discount", f"{spec.gamma:g}"],
        ["physics", PHYSICS.get(name, "-")],
        ["Gymnasium id", f"`{spec.gym_id}`" if spec.gym_id else "-"],
        ["class", f"`{cls.__module__}.{cls.__qualname__}`"],
    ]
    out = [Section("Overview", [spec.description, (["", ""], facts)])]
    if preset:
        out[0].blocks.append(preset)
    out.append(Section("Description", [doc.get("Description", spec.description)]))
    if "Model" in doc:
        out.append(Section("Model", [doc["Model"]]))
    out.append(Section("Action", [doc.get("Action", ""), *_action_tables(spec)]))
    obs = spec.observation
    modes = (
        f"Observation modes: {', '.join(f'`{m}`' for m in spec.obs_modes)}; the table is the "
        f"default mode `{spec.default_obs_mode}` ({obs.dim} entries per agent)."
        if spec.obs_modes
        else f"{obs.dim} entries."
    )
    obs_table = (["field", "unit", "low", "high"], _vector_rows(*_vec(obs)))
    out.append(Section("Observation", [doc.get("Observation", ""), modes, obs_table]))
    reward_text = doc.get("Reward", spec.reward_doc)
    presets = ", ".join(f"`{p}`" for p in spec.reward_presets) or "none"
    reward_facts = f"Reward presets: {presets}."
    listed = "reward_terms" in reward_text and all(
        re.search(rf"\b{re.escape(t)}\b", reward_text) for t in spec.reward_terms
    )
    if not listed:  # the docstring does not list `info["reward_terms"]` itself: the spec's list
        terms = ", ".join(f"`{t}`" for t in spec.reward_terms)
        reward_facts = f'Terms (`info["reward_terms"]`): {terms}. {reward_facts}'
    out.append(Section("Reward", [reward_text, reward_facts]))
    budget_rows = [
        [
            f"`{c}`",
            u,
            "yes" if c in spec.selected_constraints else "no (reported)",
            _fmt(spec.cost_thresholds[c]) if c in spec.cost_thresholds else "-",
        ]
        for c, u in zip(spec.constraint_names, spec.constraint_units, strict=True)
    ]
    cost_table = (["cost", "unit", "selected (CMDP)", "budget per episode"], budget_rows)
    out.append(Section("Costs", [doc.get("Costs", ""), cost_table]))
    out.append(Section("Starting state", [doc.get("Starting state", "")]))
    # the docstring's own sentence where it gives one, else the spec's (never both: they say
    # the same; the horizon is also in the overview table)
    end = f"Truncated after {spec.horizon} steps; termination: {spec.termination_doc}."
    out.append(Section("Episode end", [doc.get("Episode end") or end]))
    split_table = (["split", "kind", "start days"], _split_rows(spec, episode_days))
    out.append(Section("Splits", [split_table]))
    base_table = (["policy", "split", "mean return", "std"], _baseline_rows(name, spec))
    out.append(
        Section(
            "Baselines",
            [
                f"Return in {return_unit(spec)}, from the packaged baselines table.",
                base_table,
                *(
                    [f"`idle` (the operator does nothing): {spec.idle_doc}."]
                    if spec.idle_doc
                    else []
                ),
                *([doc["Baselines"]] if "Baselines" in doc else []),
            ],
        )
    )
    out.append(Section("Task card", card_markdown(name)))
    out.append(Section("Training and results", training_blocks(name)))
    out.append(Section("Arguments", [doc.get("Arguments", ""), arguments_table(name)]))
    if example:
        out.append(Section("Example", [("python", _example(name, spec))]))
    if figure:
        caption = (
            f"One test day of `{name}` under the rule-based policy: of 8 test days spread over the "
            "split, the one where the rule acts most (its day number in the title)"
        )
        out.append(Section("Figure", [f"![{caption}]({figure})", f"*{caption}.*"]))
    if "Reference" in doc:
        out.append(Section("Reference", [doc["Reference"]]))
    for section in out:
        section.blocks = [b for b in section.blocks if b != ""]
    return out


def _vec(v: Any) -> tuple:
    return v.names, v.units, v.low, v.high


# ---- rendering ---------------------------------------------------------------------------
def _md_table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


def render_markdown(name: str, figure: str | None = None) -> str:
    """Task ``name``'s page as Markdown (see :func:`task_sections`)."""
    lines = [f"# `{name}`", ""]
    for section in task_sections(name, figure):
        if section.title != "Overview":
            lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, str):
                lines += [block, ""]
            elif block[0] == "python":
                lines += ["```python", block[1], "```", ""]
            else:
                lines += [_md_table(*block), ""]
    return "\n".join(lines)


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    rows = [[c.replace("`", "") for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    shown = [header, *rows] if any(header) else rows
    return "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in shown
    )


def render_text(name: str) -> str:
    """Task ``name``'s page as plain text, for a terminal (``powerzoo describe``)."""
    lines = [name, "=" * len(name)]
    for section in task_sections(name, example=False):
        if section.title != "Overview":
            lines += ["", section.title.upper()]
        for block in section.blocks:
            if isinstance(block, str):
                lines.append(block.replace("`", ""))
            else:
                lines.append(_text_table(*block))
    return "\n".join(lines)


def index_page(tasks: list[str] | None = None) -> str:
    """The catalogue page: one row per task (kind, agents, horizon, physics, link)."""
    rows = []
    for name in tasks or list_tasks():
        spec = task_spec(name)
        kind = "single-agent" if spec.agent_mode == "single" else "multi-agent"
        rows.append(
            [
                f"[`{name}`]({name}.md)",
                kind,
                str(len(spec.agents)),
                f"{spec.horizon} x {spec.step_minutes} min",
                PHYSICS.get(name, "-"),
                spec.description,
            ]
        )
    header = ["task", "kind", "agents", "horizon", "physics", "description"]
    intro = (
        "Every task below has a page generated from its spec, its docstring and the packaged "
        "baselines (`powerzoo docs-pages`); `powerzoo describe TASK` prints the same in a "
        "terminal."
    )
    return "\n".join(["# Tasks", "", intro, "", _md_table(header, rows), ""])


def write_pages(
    out_dir: str | Path,
    tasks: list[str] | None = None,
    figures: bool = True,
    reuse_figures: bool = False,
) -> dict:
    """Write ``<task>.md`` (and ``img/<task>.png`` when ``figures``) for each task, and
    ``index.md``, into ``out_dir``.

    Args:
        out_dir: the folder of the pages (``docs/tasks`` for the site).
        tasks: task names (default: every registered task). The index lists these and every
            other registered task whose page is already in ``out_dir``.
        figures: draw the figure of one test day under the rule-based policy.
        reuse_figures: keep a figure that is already there instead of drawing it again.

    Returns:
        ``{task: seconds}`` spent per task.
    """
    import time

    from powerzoo.benchmarks.task_figures import plot_rule_day

    out = Path(out_dir)
    (out / "img").mkdir(parents=True, exist_ok=True)
    names = tasks or list_tasks()
    for name in names:
        get_task_class(name)  # ValueError for an unknown name before anything is written
    seconds = {}
    for name in names:
        started = time.perf_counter()
        figure = None
        if figures:
            path = out / "img" / f"{name}.png"
            if not (reuse_figures and path.is_file()):
                plot_rule_day(name, path)
            figure = f"img/{name}.png"
        _write_if_changed(out / f"{name}.md", render_markdown(name, figure))
        seconds[name] = time.perf_counter() - started
    # the index lists every task with a page in the folder: writing some pages keeps the others
    listed = [name for name in list_tasks() if name in names or (out / f"{name}.md").is_file()]
    _write_if_changed(out / "index.md", index_page(listed))
    return seconds


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` unless the file already holds it (``mkdocs serve`` rebuilds on every
    write into the docs folder, so an unchanged page must not be touched)."""
    if not (path.is_file() and path.read_text(encoding="utf-8") == text):
        path.write_text(text, encoding="utf-8")
