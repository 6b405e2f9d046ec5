"""A campaign's trials on held-out scenario families: the ``evaluation.families`` key, the
episodes each trial record holds, and their pairing with the test days."""

from __future__ import annotations

import pytest

from powerzoo.benchmarks.baselines import evaluation_protocol
from powerzoo.benchmarks.families import paired_days, scenario_families
from powerzoo.rl.campaigns import CampaignError, parse_campaign, run_local
from powerzoo.rl.campaigns.family_episodes import family_plan, resolve_families
from powerzoo.rl.campaigns.spec import CampaignSpec
from powerzoo.rl.campaigns.trial import record_problem


def _campaign(families, tasks=("battery_arbitrage",)):
    return {
        "name": "families",
        "tasks": list(tasks),
        "seeds": [2],
        "track": {"name": "S", "wall_clock_s": 1, "clock": "cpu"},
        "budget": {"total_timesteps": 256, "n_envs": 2},
        "evaluation": {
            "split": "test",
            "env_seeds": "protocol",
            "baselines": [],
            "plots": False,
            "families": families,
        },
        "algorithms": {
            "PPO": {
                "settings": {
                    "default": {
                        "algorithm_kwargs": {"n_steps": 64, "batch_size": 64},
                        "overrides": {"evaluation": None},
                    }
                }
            }
        },
    }


def test_families_resolve_by_count_or_name_and_bad_values_fail():
    known = scenario_families("battery_arbitrage")
    assert resolve_families("battery_arbitrage", 2) == known[:2]
    assert resolve_families("battery_arbitrage", None) == ()
    assert resolve_families("battery_arbitrage", ("price_spike", "line_tightening")) == (
        "price_spike",
    )
    assert resolve_families("tso", ("price_spike", "line_tightening")) == ("line_tightening",)
    campaign = parse_campaign(_campaign(["price_spike"]))
    assert campaign.families == ("price_spike",)
    assert campaign.families_of("battery_arbitrage") == ("price_spike",)
    assert CampaignSpec.from_dict(campaign.to_dict()) == campaign
    # asking for families is part of the protocol: another fingerprint than without them
    assert parse_campaign(_campaign(None)).fingerprint() != campaign.fingerprint()
    assert parse_campaign(_campaign(0)).families is None
    with pytest.raises(CampaignError, match="no campaign task has the famil"):
        parse_campaign(_campaign(["tornado"]))
    with pytest.raises(CampaignError, match="must be a count"):
        parse_campaign(_campaign(-1))


def test_family_plan_pairs_each_family_day_with_its_test_day_and_env_seed():
    protocol = evaluation_protocol("tso", "test")  # 16 of the 65 test days
    plan = family_plan("tso", "load_stress", protocol["day_ids"], 7)
    pairs = paired_days("tso", "load_stress")
    tested = set(protocol["day_ids"])
    assert [(f, t) for f, t, _ in plan] == [(f, t) for f, t in pairs if t in tested]
    assert len(plan) == 16
    assert all(seed == 7 + t for _, t, seed in plan)


def test_a_trial_runs_its_families_and_its_record_is_checked_for_them(tmp_path):
    campaign = parse_campaign(_campaign(["price_spike"]))
    (trial,) = campaign.trials
    out = run_local(campaign, tmp_path / "out", progress=False, gather_results=False)
    (record,) = out.values()
    rows = record["families"]["price_spike"]
    protocol = evaluation_protocol("battery_arbitrage", "test")
    plan = family_plan("battery_arbitrage", "price_spike", protocol["day_ids"], protocol["seed"])
    assert [(r["day_id"], r["test_day_id"], r["env_seed"]) for r in rows] == plan
    assert all(r["length"] > 0 and f"cost_{record['cost_names'][0]}" in r for r in rows)
    # the same env seed as the trial's own test episode on the twin day (the protocol's)
    test_seed = {e["day_id"]: e["env_seed"] for e in record["episodes"]}
    assert all(r["env_seed"] == test_seed[r["test_day_id"]] for r in rows)
    assert record_problem(record, trial, campaign) is None
    missing = {k: v for k, v in record.items() if k != "families"}
    assert "no family episodes" in record_problem(missing, trial, campaign)
    broken = {**record, "families": {"price_spike": [{**rows[0], "return": float("nan")}]}}
    assert "not a finite number" in record_problem(broken, trial, campaign)


def _rename_family(path, old, new, **episode0):
    import json

    record = json.loads(path.read_text())
    record["families"] = {new: record["families"].pop(old)}
    record["episodes"][0].update(episode0)
    path.write_text(json.dumps(record))
    return record


def test_a_finished_trial_gets_the_families_its_task_now_names_without_training_again(tmp_path):
    """A task whose family list changed after its trials finished: the campaign runs the new
    family on each saved model (the same rows as a fresh trial), drops the old one, logs it,
    and neither trains again nor touches a record whose model no longer replays its test."""
    import json

    from powerzoo.rl.campaigns.family_top_up import family_only_problem, top_up_families
    from powerzoo.rl.campaigns.trial import TRIAL_FILE, trial_dir

    campaign = parse_campaign(_campaign(1))  # battery_arbitrage's first family
    (trial,) = campaign.trials
    (family,) = campaign.families_of("battery_arbitrage")
    out = tmp_path / "out"
    (fresh,) = run_local(campaign, out, progress=False, gather_results=False).values()
    path = trial_dir(out, trial) / TRIAL_FILE
    # as if the task had named another family when the trial ran
    stale = _rename_family(path, family, "retired_family")
    assert "no episodes on the famil" in family_only_problem(stale, trial, campaign)

    report = top_up_families(campaign, out)
    assert report.topped_up == [trial.trial_id] and report.refused == {}
    topped = json.loads(path.read_text())
    assert topped["families"] == fresh["families"]  # bit-identical to the fresh trial's rows
    (log,) = topped["families_topped_up"]
    assert log["added"] == [family] and log["dropped"] == ["retired_family"]
    assert record_problem(topped, trial, campaign) is None
    # the campaign run again keeps it: no second training
    (again,) = run_local(campaign, out, progress=False, gather_results=False).values()
    assert again["finished_at"] == fresh["finished_at"]
    assert top_up_families(campaign, out).topped_up == []

    # a record its saved model no longer replays is left as it is, with the reason
    _rename_family(path, family, "retired_family", **{"return": fresh["episodes"][0]["return"] + 1})
    before = path.read_text()
    report = top_up_families(campaign, out)
    assert report.topped_up == [] and "not the tested model" in report.refused[trial.trial_id]
    assert path.read_text() == before
    with pytest.warns(RuntimeWarning, match="could not be topped up"):
        left = run_local(campaign, out, progress=False, gather_results=False)
    assert left == {}  # left out of the tables, its folder kept as evidence
    assert path.read_text() == before


def test_a_family_held_with_a_broken_row_is_run_again_from_the_saved_model(tmp_path):
    import json

    from powerzoo.rl.campaigns.family_top_up import top_up_families
    from powerzoo.rl.campaigns.trial import TRIAL_FILE, trial_dir

    campaign = parse_campaign(_campaign(1))
    (trial,) = campaign.trials
    (family,) = campaign.families_of("battery_arbitrage")
    out = tmp_path / "out"
    (fresh,) = run_local(campaign, out, progress=False, gather_results=False).values()
    path = trial_dir(out, trial) / TRIAL_FILE
    broken = json.loads(path.read_text())
    broken["families"][family][0]["return"] = None
    path.write_text(json.dumps(broken))
    assert top_up_families(campaign, out).topped_up == [trial.trial_id]
    topped = json.loads(path.read_text())
    assert topped["families"] == fresh["families"]
    assert topped["families_topped_up"][0]["added"] == [family]
    assert record_problem(topped, trial, campaign) is None
