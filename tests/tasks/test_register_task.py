"""A task defined outside the package, added with ``register_task``, works through every adapter.

The two tasks below live in this test module only: a one-agent store trading at the day's
price and a two-generator dispatch. Registering them is the whole integration: no table,
config or other file of the package is touched.
"""

import dataclasses
import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from pettingzoo.test import parallel_api_test
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import powerzoo  # noqa: F401  (registers the Gymnasium ids)
from powerzoo.benchmarks import catalog
from powerzoo.cli.main import main
from powerzoo.data import calendar
from powerzoo.rl import make_env
from powerzoo.tasks import (
    describe,
    get_task_class,
    info,
    list_tasks,
    register_task,
    task_spec,
    unregister_task,
)
from powerzoo.tasks.base import StepOutput, Task
from powerzoo.tasks.spec import TaskSpec, VectorSpec

STORE, DISPATCH = "toy_store", "toy_dispatch"
STORE_GYM_ID = "powerzoo-test/ToyStore-v0"
HORIZON = 8  # half-hour steps: short episodes, so the tests cross episode ends


# ---- a single-agent task ------------------------------------------------------------------
@dataclasses.dataclass
class StoreState:
    day_id: np.ndarray  # [B] split day the episode started on
    t: np.ndarray  # [B] steps elapsed
    level_mwh: np.ndarray  # [B] stored energy


@dataclasses.dataclass(frozen=True)
class StoreParams:
    capacity_mwh: float = 1.0  # energy held when full (MWh)


class ToyStore(Task):
    """A store of ``capacity_mwh`` trading up to 1 MW at the day's price (+ = discharge)."""

    Params = StoreParams

    def __init__(self, split: str = "train", **params: float) -> None:
        self.params = self.make_params(**params)
        super().__init__(self.spec_for(self.params), split)
        self.capacity_mwh = self.params.capacity_mwh
        self.price = self.profiles.series["price_per_mwh"]

    @classmethod
    def spec_for(cls, params: StoreParams) -> TaskSpec:
        capacity_mwh = params.capacity_mwh
        return TaskSpec(
            task_id=STORE,
            description=f"A {capacity_mwh:g} MWh store buys and sells 1 MW at the day's price.",
            agents=("agent",),
            observation=VectorSpec(
                names=("level_mwh", "price_per_mwh", "time_remaining"),
                units=("MWh", "$/MWh", "fraction of horizon"),
                low=(0.0, -1000.0, 0.0),
                high=(capacity_mwh, 10000.0, 1.0),
                nominal_high=(capacity_mwh, 150.0, 1.0),
            ),
            action=VectorSpec(names=("p_mw",), units=("MW",), low=(-1.0,), high=(1.0,)),
            horizon=HORIZON,
            step_minutes=30,
            splits=calendar.BASE_SPLITS,
            reward_terms=("revenue",),
            reward_doc="price x discharged MWh - price x charged MWh ($)",
            constraint_names=("level_violation",),
            constraint_units=("MWh",),
            selected_constraints=("level_violation",),
            cost_thresholds={"level_violation": 0.5},
            baselines=("random",),
            gym_id=STORE_GYM_ID,
        )

    def _price_now(self, state: StoreState) -> np.ndarray:
        return self.price[self.calendar_day(state.day_id) * self.profiles.steps_per_day + state.t]

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> StoreState:
        day_id = self.check_day_id(day_id)
        return StoreState(day_id, np.zeros_like(day_id), np.full(day_id.shape, 0.5))

    def observe(self, state: StoreState) -> np.ndarray:
        columns = (state.level_mwh, self._price_now(state), 1.0 - state.t / HORIZON)
        return np.stack(columns, axis=1).astype(np.float32)

    def step(
        self, state: StoreState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[StoreState, StepOutput]:
        asked = state.level_mwh - action[:, 0] * self.spec.dt_h
        level = np.clip(asked, 0.0, self.capacity_mwh)
        applied = (state.level_mwh - level) / self.spec.dt_h
        revenue = self._price_now(state) * applied * self.spec.dt_h
        out = StepOutput(
            reward=revenue,
            reward_terms=revenue[:, None],
            constraint_costs=np.abs(asked - level)[:, None],
            terminated=np.zeros(level.size, dtype=bool),
            action_applied=applied[:, None],
            info={"level_mwh": level},
        )
        return StoreState(state.day_id, state.t + 1, level), out


# ---- a multi-agent task -------------------------------------------------------------------
@dataclasses.dataclass
class DispatchState:
    day_id: np.ndarray  # [B]
    t: np.ndarray  # [B]
    prev_p_mw: np.ndarray  # [B, 2] last output of each generator


class ToyDispatch(Task):
    """Two generators (1 MW each, 20 and 40 $/MWh) meet a demand of up to 1.5 MW together."""

    COST = np.array([20.0, 40.0])

    def __init__(self, split: str = "train") -> None:
        super().__init__(self.make_spec(), split)
        self.demand = self.profiles.series["demand_pu"]

    @classmethod
    def spec_for(cls, params: object) -> TaskSpec:
        agents = ("gen_0", "gen_1")
        return TaskSpec(
            task_id=DISPATCH,
            description="Two generators share a demand; shared reward, imbalance is a cost.",
            agents=agents,
            observation=VectorSpec(
                names=("demand_mw", "own_prev_p_mw", "time_remaining"),
                units=("MW", "MW", "fraction of horizon"),
                low=(0.0, 0.0, 0.0),
                high=(3.0, 1.0, 1.0),
            ),
            action=VectorSpec(
                names=tuple(f"{a}.p_mw" for a in agents),
                units=("MW", "MW"),
                low=(0.0, 0.0),
                high=(1.0, 1.0),
            ),
            horizon=HORIZON,
            step_minutes=30,
            splits=calendar.BASE_SPLITS,
            reward_terms=("generation_cost", "imbalance_cost"),
            reward_doc="-(generation cost + 100 $/MWh x |imbalance|) ($), shared",
            constraint_names=("power_imbalance",),
            constraint_units=("MWh",),
            selected_constraints=("power_imbalance",),
            cost_thresholds={"power_imbalance": 1.0},
            baselines=("random",),
        )

    def _demand_now(self, state: DispatchState) -> np.ndarray:
        steps = self.profiles.steps_per_day
        return 1.5 * self.demand[self.calendar_day(state.day_id) * steps + state.t]

    def reset(self, rng: np.random.Generator, day_id: np.ndarray) -> DispatchState:
        day_id = self.check_day_id(day_id)
        return DispatchState(day_id, np.zeros_like(day_id), np.zeros((day_id.size, 2)))

    def observe(self, state: DispatchState, obs_mode: str | None = None) -> np.ndarray:
        obs = np.empty((state.t.size, 2, 3), dtype=np.float32)
        obs[:, :, 0] = self._demand_now(state)[:, None]
        obs[:, :, 1] = state.prev_p_mw
        obs[:, :, 2] = (1.0 - state.t / HORIZON)[:, None]
        return obs

    def step(
        self, state: DispatchState, action: np.ndarray, rng: np.random.Generator
    ) -> tuple[DispatchState, StepOutput]:
        imbalance_mwh = np.abs(action.sum(axis=1) - self._demand_now(state)) * self.spec.dt_h
        terms = np.stack([-(action @ self.COST) * self.spec.dt_h, -100.0 * imbalance_mwh], axis=1)
        out = StepOutput(
            reward=terms.sum(axis=1),
            reward_terms=terms,
            constraint_costs=imbalance_mwh[:, None],
            terminated=np.zeros(state.t.size, dtype=bool),
            action_applied=action.copy(),
            info={"imbalance_mwh": imbalance_mwh},
        )
        return DispatchState(state.day_id, state.t + 1, action.copy()), out


@pytest.fixture(scope="module", autouse=True)
def registered():
    """Both tasks registered for this module's tests only (other modules iterate the tasks)."""
    register_task(STORE, ToyStore)
    register_task(DISPATCH, ToyDispatch)
    yield
    unregister_task(STORE)
    unregister_task(DISPATCH)


# ---- the single-agent task through every adapter ------------------------------------------
def test_registered_tasks_are_listed_next_to_the_built_ins():
    assert {STORE, DISPATCH, "battery_arbitrage"} <= set(list_tasks())
    assert get_task_class(STORE) is ToyStore and task_spec(STORE).gym_id == STORE_GYM_ID


@pytest.mark.parametrize("normalize", [False, True])
def test_gymnasium_env_passes_the_gymnasium_and_sb3_checkers(normalize):
    env = make_env(STORE, normalize=normalize, seed=0)
    gym_check_env(env if normalize else env.unwrapped, skip_render_check=True)
    sb3_check_env(env, warn=False)
    assert env.unwrapped.spec.id == STORE_GYM_ID


def test_native_vector_env_steps_across_episode_ends():
    env = make_env(STORE, num_envs=4, seed=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 3) and env.num_envs == 4
    for _ in range(HORIZON + 2):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs.shape == (4, 3) and reward.shape == (4,) and not terminated.any()
        assert info["constraint_costs"].shape == (4, 1)
    assert truncated.dtype == bool


def test_gymnasium_make_and_make_vec_reach_the_task_by_its_spec_id():
    env = gym.make(STORE_GYM_ID, split="val", capacity_mwh=2.0)
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs) and env.unwrapped.task.capacity_mwh == 2.0
    env.step(env.action_space.sample())
    vec = gym.make_vec(STORE_GYM_ID, num_envs=3)
    assert type(vec.unwrapped).__name__ == "PowerZooVectorEnv" and vec.num_envs == 3
    with pytest.raises(TypeError, match="unexpected keyword argument 'volume'"):
        gym.make(STORE_GYM_ID, volume=3)


def test_info_describe_and_the_cli_cover_the_task(capsys):
    d = info(STORE)
    assert d["task_id"] == STORE and d["gym_id"] == STORE_GYM_ID and d["horizon"] == HORIZON
    assert d["baselines"] == {"random": None}  # the tasks layer gives names only
    assert catalog.info(STORE) == d  # the packaged table has no numbers for this task
    text = describe(STORE)
    assert "level_violation [MWh]" in text and f"gymnasium id: {STORE_GYM_ID}" in text
    assert catalog.describe(STORE) == text
    assert main(["describe", STORE, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["task_id"] == STORE
    assert main(["list"]) == 0 and DISPATCH in capsys.readouterr().out


# ---- the multi-agent task through every adapter -------------------------------------------
def test_pettingzoo_parallel_env_passes_the_api_test():
    parallel_api_test(make_env(DISPATCH, framework="pettingzoo"), num_cycles=HORIZON + 2)


def test_dict_env_adds_the_all_flags():
    env = make_env(DISPATCH, seed=0)  # framework="auto"
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"gen_0", "gen_1"} and obs["gen_0"].shape == (3,)
    for _ in range(HORIZON):
        obs, rewards, terms, truncs, infos = env.step(env.action_space.sample())
    assert truncs["__all__"] and not terms["__all__"]
    assert rewards["gen_0"] == rewards["gen_1"]  # shared reward
    assert infos["gen_1"]["constraint_costs"].shape == (1,)


def test_multi_agent_vector_env_steps_batched_dicts():
    env = make_env(DISPATCH, num_envs=5, seed=0)
    obs, _ = env.reset(seed=0)
    assert obs["gen_0"].shape == (5, 3)
    actions = {agent: np.full((5, 1), 0.5, dtype=np.float32) for agent in env.possible_agents}
    obs, rewards, _, _, info = env.step(actions)
    assert rewards["gen_1"].shape == (5,) and info["constraint_costs"].shape == (5, 1)
    assert describe(DISPATCH).startswith(f"{DISPATCH} (multi-agent, 2 agent(s))")


# ---- registering: lazy entry points and errors --------------------------------------------
def test_a_module_class_string_is_imported_on_first_use():
    unregister_task(STORE)
    try:
        assert STORE_GYM_ID not in gym.registry  # removing the task removes its id
        register_task(STORE, f"{__name__}:ToyStore")
        assert STORE in list_tasks() and STORE_GYM_ID not in gym.registry  # spec not read yet
        assert get_task_class(STORE) is ToyStore and STORE_GYM_ID in gym.registry
        register_task(STORE, f"{__name__}:ToyStore", gym_id=STORE_GYM_ID, overwrite=True)
        assert gym.make(STORE_GYM_ID).unwrapped.task.spec.task_id == STORE  # id given up front
    finally:
        register_task(STORE, ToyStore, overwrite=True)


class NotATask:
    pass


class HalfATask(Task):
    @classmethod
    def spec_for(cls, params: object) -> TaskSpec:
        return ToyStore.make_spec()


class OtherGymId(ToyStore):
    @classmethod
    def spec_for(cls, params: StoreParams) -> TaskSpec:
        return dataclasses.replace(ToyStore.make_spec(), gym_id="powerzoo/BatteryArbitrage-v0")


@dataclasses.dataclass(frozen=True)
class CapacityRequired:
    capacity_mwh: float  # no default: the spec cannot be made without it


class SpecNeedsArguments(ToyStore):
    Params = CapacityRequired


@pytest.mark.parametrize(
    ("name", "entry_point", "kwargs", "error", "match"),
    [
        (STORE, ToyStore, {}, ValueError, "already registered .*overwrite=True"),
        ("", ToyStore, {}, ValueError, "non-empty string"),
        ("toy", "no_colon", {}, ValueError, "must be 'package.module:ClassName'"),
        ("toy", "a.b:C:D", {}, ValueError, "must be 'package.module:ClassName'"),
        ("toy", "no_such_package_xyz.tasks:Toy", {}, ValueError, "no module named"),
        ("toy", NotATask, {}, TypeError, "subclass of powerzoo.tasks.base.Task"),
        ("toy", ToyStore.make_spec, {}, TypeError, "subclass of powerzoo.tasks.base.Task"),
        ("toy", HalfATask, {}, TypeError, "does not implement observe, reset, step"),
        ("toy", ToyStore, {}, ValueError, "names the task 'toy_store'"),
        (STORE, SpecNeedsArguments, {"overwrite": True}, TypeError, "without arguments"),
        (STORE, ToyStore, {"gym_id": "x/Y-v0", "overwrite": True}, ValueError, "declares"),
        (STORE, OtherGymId, {"overwrite": True}, ValueError, "belongs to task 'battery_arb"),
    ],
)
def test_register_task_errors_leave_the_registry_as_it_was(name, entry_point, kwargs, error, match):
    before = {task: get_task_class(task) for task in (STORE, DISPATCH)}
    with pytest.raises(error, match=match):
        register_task(name, entry_point, **kwargs)
    assert {task: get_task_class(task) for task in (STORE, DISPATCH)} == before
    assert "toy" not in list_tasks() and gym.registry[STORE_GYM_ID].kwargs == {"task": STORE}


def test_a_bad_string_entry_point_fails_on_first_use_and_unknown_names_are_refused():
    register_task("toy", f"{__name__}:ToyStore")  # spec names the task "toy_store"
    register_task("toy_missing", f"{__name__}:NoSuchTask")
    try:
        with pytest.raises(ValueError, match="names the task 'toy_store'"):
            get_task_class("toy")
        with pytest.raises(ValueError, match="has no 'NoSuchTask'"):
            make_env("toy_missing")
    finally:
        unregister_task("toy")
        unregister_task("toy_missing")
    with pytest.raises(ValueError, match="unknown task 'toy'"):
        unregister_task("toy")
