"""Mushroom data loading, the bandit's rewards and regret, and short seeded agent runs."""
import mxnet as mx
from mxnet import nd
import numpy as np
import pytest
from matplotlib.figure import Figure

from gluon_bbb import bandit
from gluon_bbb.data.mushroom import MushroomFormatError, load_mushroom, one_hot_encode, parse_mushroom_lines

# 22 attribute letters per row; odor (attribute 5) decides the class: n -> edible, f -> poisonous.
TINY_ROWS = [
    ("e", "xsntnfcbkecsswwpwopnng"),
    ("p", "xsntffcbkecsswwpwopnng"),
    ("e", "bsntnfcbkecsswwpwopkng"),
    ("p", "bsntffcbkecsswwpwopkng"),
    ("e", "xyntnfcbkecsswwpwopnnu"),
    ("p", "xyntffcbkecsswwpwopnnu"),
]


def tiny_lines(rows=TINY_ROWS):
    return [",".join((label,) + tuple(letters)) for label, letters in rows]


@pytest.fixture
def tiny_file(tmp_path):
    path = tmp_path / "tiny.data"
    path.write_text("\n".join(tiny_lines()) + "\n\n")  # trailing blank lines are fine
    return path


@pytest.fixture
def tiny_env(tiny_file):
    data = load_mushroom(tiny_file)
    return bandit.MushroomBandit(data.contexts, data.edible)


# ------------------------------------------------------------------ data
def test_load_and_one_hot_encode_a_tiny_table(tiny_file):
    data = load_mushroom(tiny_file)
    np.testing.assert_array_equal(data.edible, [True, False] * 3)
    assert data.categories[0] == "bx" and data.categories[1] == "sy" and data.categories[4] == "fn"
    assert data.categories[19] == "kn" and data.categories[21] == "gu"
    assert data.contexts.shape == (6, 22 + 5)  # five attributes have two categories
    assert len(data.feature_names) == 27 and data.feature_names[:2] == ["cap-shape=b", "cap-shape=x"]
    np.testing.assert_array_equal(data.contexts.sum(axis=1), 22)
    # row 3 ("b", "s", ..., odor "f", ..., spore-print-color "k", habitat "g"), blocks by hand
    row = data.contexts[3]
    assert list(row[:2]) == [1, 0] and list(row[2:4]) == [1, 0]
    odor = 2 + 2 + 1 + 1  # after cap-shape, cap-surface (2 categories each), cap-color, bruises
    assert data.feature_names[odor:odor + 2] == ["odor=f", "odor=n"] and list(row[odor:odor + 2]) == [1, 0]


def test_one_hot_encode_against_a_hand_example():
    encoded, categories = one_hot_encode([["b", "?"], ["a", "?"], ["b", "c"]])
    assert categories == ("ab", "?c")
    np.testing.assert_array_equal(encoded, [[0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1]])


@pytest.mark.parametrize("bad_line, message", [
    ("e,x,s", r":3: expected 23 comma-separated values, found 3"),
    ("e,xx" + ",s" * 21, r":3: column 2 is 'xx'"),
    ("q" + ",s" * 22, r":3: class \(column 1\) is 'q'"),
    ("e,1" + ",s" * 21, r":3: column 2 is '1'"),
    ("", r":3: blank line"),
])
def test_format_errors_name_the_line(tmp_path, bad_line, message):
    lines = tiny_lines()
    lines.insert(2, bad_line)
    path = tmp_path / "bad.data"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MushroomFormatError, match=message):
        load_mushroom(path)


def test_many_format_errors_are_summarised_and_missing_files_named(tmp_path):
    with pytest.raises(MushroomFormatError, match=r"7 malformed line\(s\)(.|\n)*and 2 more"):
        parse_mushroom_lines(["e,x"] * 7, source="x")
    with pytest.raises(MushroomFormatError, match="no data"):
        parse_mushroom_lines(["", "  "], source="x")
    with pytest.raises(FileNotFoundError, match="nowhere.data"):
        load_mushroom(tmp_path / "nowhere.data")


def test_a_gzipped_or_zipped_file_reads_as_the_plain_one(tiny_file, tmp_path):
    """What ``gluon-bbb data verify`` accepts, the loader reads: gzip, or UCI's zip (the file
    as one member beside others), told apart by the first bytes whatever the name."""
    import gzip
    import zipfile
    plain = load_mushroom(tiny_file)
    gzipped = tmp_path / "agaricus-lepiota.data"  # the plain name, gzip bytes
    gzipped.write_bytes(gzip.compress(tiny_file.read_bytes().replace(b"\n", b"\r\n")))
    zipped = tmp_path / "mushroom.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("agaricus-lepiota.names", "not data")
        archive.writestr("agaricus-lepiota.data", tiny_file.read_bytes())
    for path in (gzipped, zipped):
        data = load_mushroom(path)
        np.testing.assert_array_equal(data.contexts, plain.contexts)
        np.testing.assert_array_equal(data.edible, plain.edible)
        assert data.feature_names == plain.feature_names


def test_a_bad_compressed_or_oversized_file_is_named_in_one_line(tiny_file, tmp_path, monkeypatch):
    import gzip
    from gluon_bbb.data import mushroom
    truncated = tmp_path / "truncated.data"
    truncated.write_bytes(gzip.compress(tiny_file.read_bytes() * 50)[:60])
    with pytest.raises(ValueError, match=r"truncated\.data: corrupt or truncated"):
        load_mushroom(truncated)
    monkeypatch.setattr(mushroom, "READ_LIMIT", 100)
    with pytest.raises(ValueError, match=r"tiny\.data: holds more than 100 bytes"):
        load_mushroom(tiny_file)


def test_the_default_file_is_found_through_gluon_bbb_data(tiny_file, tmp_path, monkeypatch):
    """The notebook and the CLI leave the path to the package: $GLUON_BBB_DATA/mushroom/."""
    (tmp_path / "root" / "mushroom").mkdir(parents=True)
    (tmp_path / "root" / "mushroom" / "agaricus-lepiota.data").write_bytes(tiny_file.read_bytes())
    monkeypatch.setenv("GLUON_BBB_DATA", str(tmp_path / "root"))
    assert load_mushroom().edible.tolist() == load_mushroom(tiny_file).edible.tolist()
    monkeypatch.setenv("GLUON_BBB_DATA", str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="set GLUON_BBB_DATA to the folder holding "
                                                "mushroom/agaricus-lepiota.data"):
        load_mushroom(download=False)


# ------------------------------------------------------------------ environment
def test_rewards_expected_rewards_and_oracle_by_hand(tiny_env):
    indices = np.array([0, 1, 1, 0, 1])  # edible, poisonous, poisonous, edible, poisonous
    actions = np.array([bandit.EAT, bandit.EAT, bandit.EAT, bandit.PASS, bandit.PASS])
    harmful = np.array([True, True, False, False, True])
    np.testing.assert_array_equal(tiny_env.rewards(indices, actions, harmful), [5, -35, 5, 0, 0])
    np.testing.assert_array_equal(tiny_env.expected_rewards(indices, actions), [5, -15, -15, 0, 0])
    np.testing.assert_array_equal(tiny_env.oracle_rewards(indices), [5, 0, 0, 5, 0])
    with pytest.raises(ValueError, match="actions"):
        tiny_env.rewards([0], [2], [True])
    with pytest.raises(ValueError, match="indices"):
        tiny_env.rewards([6], [0], [True])
    with pytest.raises(ValueError, match="edible"):
        bandit.MushroomBandit(np.zeros((2, 3)), [1, 0])


class FixedAgent:
    def __init__(self, action):
        self.action = action

    def act(self, context):
        return self.action

    def observe(self, context, action, reward):
        pass


def test_regret_of_fixed_policies_against_the_oracle(tiny_env):
    indices, harmful = tiny_env.draw_episode(200, seed=5)
    edible = tiny_env.edible[indices]
    never = bandit.run_bandit(FixedAgent(bandit.PASS), tiny_env, 200, seed=5)
    np.testing.assert_array_equal(never.indices, indices)
    np.testing.assert_array_equal(never.regret, np.where(edible, 5.0, 0.0))
    np.testing.assert_array_equal(never.expected_regret, never.regret)
    always = bandit.run_bandit(FixedAgent(bandit.EAT), tiny_env, 200, seed=5)
    np.testing.assert_array_equal(always.regret, np.where(edible, 0.0, np.where(harmful, 35.0, -5.0)))
    np.testing.assert_array_equal(always.expected_regret, np.where(edible, 0.0, 15.0))
    assert always.cumulative_expected_regret[-1] == 15.0 * np.sum(~edible)
    assert 0.3 < harmful[~edible].mean() < 0.7


def test_a_kernel_keeps_a_line_of_what_the_agent_reached(tiny_env, kernel, no_ipywidgets,
                                                         capsys):
    history = bandit.run_bandit(FixedAgent(bandit.EAT), tiny_env, 20, seed=5, progress=True)
    regret = history.cumulative_expected_regret[-1]
    assert capsys.readouterr().out == f"FixedAgent: 20 steps, cumulative expected regret {regret:,.0f}\n"
    bandit.run_bandit(FixedAgent(bandit.EAT), tiny_env, 20, seed=5)  # progress off: nothing
    assert capsys.readouterr().out == ""


def test_action_inputs_and_replay_buffer():
    inputs = bandit.action_inputs([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(inputs, [[1, 0, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 0, 1]])
    buffer = bandit.ReplayBuffer(3, 2)
    for value in range(5):
        buffer.add([value, value], value)
    assert len(buffer) == 3
    assert sorted(buffer.rewards.tolist()) == [2, 3, 4]
    rows, rewards = buffer.sample(50, np.random.default_rng(0))
    assert set(rewards.tolist()) <= {2, 3, 4} and np.all(rows[:, 0] == rewards)


# ------------------------------------------------------------------ agents
SMALL = dict(hidden_sizes=(8,), buffer_size=32, num_minibatches=2, batch_size=8, learning_rate=0.01)


def run_agent(env, kind, seed=0, num_steps=40):
    mx.random.seed(seed)
    if kind == "thompson":
        agent = bandit.ThompsonAgent(env.num_features, seed=seed, **SMALL)
    else:
        agent = bandit.EpsilonGreedyAgent(env.num_features, epsilon=0.05, seed=seed, **SMALL)
    return bandit.run_bandit(agent, env, num_steps, seed=seed)


@pytest.mark.parametrize("kind", ["thompson", "greedy"])
def test_short_seeded_run_is_finite_and_reproducible(tiny_env, kind):
    first = run_agent(tiny_env, kind)
    assert np.all(np.isfinite(first.regret)) and first.cumulative_expected_regret[-1] >= 0
    assert set(np.unique(first.actions)) <= {bandit.PASS, bandit.EAT}
    second = run_agent(tiny_env, kind)
    np.testing.assert_array_equal(first.actions, second.actions)


@pytest.mark.parametrize("kind", ["thompson", "greedy"])
def test_agent_trained_on_expected_rewards_acts_like_the_oracle(tiny_env, kind):
    mx.random.seed(0)
    settings = dict(SMALL, hidden_sizes=(32, 32), buffer_size=64, num_minibatches=4)
    if kind == "thompson":
        agent = bandit.ThompsonAgent(tiny_env.num_features, seed=0, **settings)
    else:
        agent = bandit.EpsilonGreedyAgent(tiny_env.num_features, epsilon=0.0, seed=0, **settings)
    indices = np.arange(len(tiny_env.edible))
    for _ in range(10):  # every (mushroom, action) pair with its expected reward
        for action in (bandit.PASS, bandit.EAT):
            for index, reward in zip(indices, tiny_env.expected_rewards(indices, np.full(6, action))):
                agent.observe(tiny_env.contexts[index], action, reward)
    actions = [agent.act(context) for context in tiny_env.contexts]
    np.testing.assert_array_equal(actions, np.where(tiny_env.edible, bandit.EAT, bandit.PASS))


def test_bad_agent_settings_and_plot():
    with pytest.raises(ValueError, match="epsilon"):
        bandit.EpsilonGreedyAgent(4, epsilon=1.5)
    with pytest.raises(ValueError, match="num_minibatches"):
        bandit.ThompsonAgent(4, num_minibatches=0)
    agent = bandit.EpsilonGreedyAgent(4, epsilon=0.0, hidden_sizes=(4,), buffer_size=8, num_minibatches=1,
                                      batch_size=2)
    with pytest.raises(ValueError, match=r"context must have shape \(4,\)"):
        agent.act(np.zeros(5))
    with pytest.raises(ValueError, match="action"):
        agent.observe(np.zeros(4), 2, 0.0)
    history = bandit.BanditHistory(*(np.arange(1.0, 4.0) for _ in range(5)))
    figure = bandit.plot_cumulative_regret({"a": history, "b": history})
    assert isinstance(figure, Figure) and figure.axes[0].get_yscale() == "log"
    no_regret = bandit.BanditHistory(*(np.zeros(3) for _ in range(5)))
    figure = bandit.plot_cumulative_regret({"a": no_regret})  # nothing to log-scale, no warning
    assert figure.axes[0].get_yscale() == "linear"


# ------------------------------------------------------------------ resuming
def test_replay_buffer_fill_equals_adding_in_order():
    rng = np.random.default_rng(3)
    for total in (0, 2, 5, 7, 12):
        inputs, rewards = rng.normal(size=(total, 2)), rng.normal(size=total)
        added, filled = bandit.ReplayBuffer(5, 2), bandit.ReplayBuffer(5, 2)
        for row, reward in zip(inputs, rewards):
            added.add(row, reward)
        filled.add([9.0, 9.0], 9.0)  # fill empties the buffer first
        filled.fill(inputs, rewards)
        assert len(filled) == len(added)
        np.testing.assert_array_equal(filled.inputs, added.inputs)
        np.testing.assert_array_equal(filled.rewards, added.rewards)
        if total:
            np.testing.assert_array_equal(filled.sample(20, np.random.default_rng(0))[1],
                                          added.sample(20, np.random.default_rng(0))[1])
    with pytest.raises(ValueError, match="inputs"):
        bandit.ReplayBuffer(5, 2).fill(np.zeros((3, 4)), np.zeros(3))


def make_small_agent(env, kind, seed=0):
    mx.random.seed(seed)
    if kind == "thompson":
        return bandit.ThompsonAgent(env.num_features, seed=seed, **SMALL)
    return bandit.EpsilonGreedyAgent(env.num_features, epsilon=0.2, seed=seed, **SMALL)


def network_values(agent):
    if kind_of(agent) == "thompson":
        agent.trainer.set_mean()
        params = agent.trainer.variational_params
    else:
        params = list(agent.net.collect_params().values())
    return [p.data().asnumpy() for p in params]


def kind_of(agent):
    return "thompson" if isinstance(agent, bandit.ThompsonAgent) else "greedy"


@pytest.mark.parametrize("kind", ["thompson", "greedy"])
def test_a_run_resumed_from_a_saved_segment_equals_the_uninterrupted_run(tiny_env, kind, tmp_path,
                                                                         monkeypatch):
    """Stopped after 2 segments of 4 steps, saved, loaded into a fresh agent and resumed: the
    same actions and the same final network, bit for bit, as 12 steps in one go."""
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 4)
    whole_agent = make_small_agent(tiny_env, kind)
    whole = bandit.run_bandit(whole_agent, tiny_env, 12, seed=1)
    saved = {}

    def save(num_done, actions):
        path = tmp_path / f"after-{num_done}.bbb"
        first_agent.save(str(path), extra={"done": num_done})
        saved[num_done] = actions

    first_agent = make_small_agent(tiny_env, kind)
    bandit.run_bandit(first_agent, tiny_env, 9, seed=1, on_segment=save)
    assert sorted(saved) == [4, 8]
    np.testing.assert_array_equal(saved[8], whole.actions[:8])
    resumed_agent = make_small_agent(tiny_env, kind, seed=7)  # another start: load overwrites it
    assert resumed_agent.load(str(tmp_path / "after-8.bbb")) == {"done": 8}
    resumed = bandit.run_bandit(resumed_agent, tiny_env, 12, seed=1, actions=saved[8])
    np.testing.assert_array_equal(resumed.actions, whole.actions)
    np.testing.assert_array_equal(resumed.cumulative_expected_regret, whole.cumulative_expected_regret)
    for ours, theirs in zip(network_values(resumed_agent), network_values(whole_agent)):
        np.testing.assert_array_equal(ours, theirs)


def test_resuming_checks_the_actions(tiny_env, monkeypatch):
    monkeypatch.setattr(bandit.play, "SEGMENT_STEPS", 4)
    agent = make_small_agent(tiny_env, "greedy")
    with pytest.raises(ValueError, match="segments of 4"):
        bandit.run_bandit(agent, tiny_env, 12, actions=[0, 1, 0])
    with pytest.raises(ValueError, match="segments of 4"):
        bandit.run_bandit(agent, tiny_env, 4, actions=[0] * 8)
    with pytest.raises(ValueError, match="actions"):
        bandit.run_bandit(agent, tiny_env, 8, actions=[0, 1, 2, 0])


def test_a_damaged_agent_checkpoint_is_named_and_leaves_the_agent_unchanged(tiny_env, tmp_path):
    for kind in ("thompson", "greedy"):
        agent = make_small_agent(tiny_env, kind)
        bandit.run_bandit(agent, tiny_env, 3)
        path = tmp_path / f"{kind}.bbb"
        agent.save(str(path))
        payload = path.read_bytes()
        path.write_bytes(payload[: len(payload) // 2])
        other = make_small_agent(tiny_env, kind, seed=4)
        before = network_values(other)
        with pytest.raises(ValueError, match=str(path)):
            other.load(str(path))
        for ours, theirs in zip(network_values(other), before):
            np.testing.assert_array_equal(ours, theirs)


def test_episodes_of_different_lengths_share_their_first_steps(tiny_env):
    short, long = tiny_env.draw_episode(50, seed=3), tiny_env.draw_episode(500, seed=3)
    np.testing.assert_array_equal(short[0], long[0][:50])
    np.testing.assert_array_equal(short[1], long[1][:50])


def test_greedy_cost_is_the_gaussian_negative_log_likelihood(tiny_env):
    """The greedy agents' one-graph cost equals sum (net(x) - r)^2 / (2 sigma^2), by NumPy."""
    agent = bandit.EpsilonGreedyAgent(tiny_env.num_features, epsilon=0.0, noise_sigma=2.0, **SMALL)
    inputs = bandit.action_inputs(tiny_env.contexts)
    rewards = np.random.default_rng(0).normal(size=len(inputs)).astype(np.float32)
    predicted = agent.predicted_rewards(inputs).astype(np.float64)
    by_hand = np.sum((predicted - rewards) ** 2) / (2 * 2.0 ** 2)
    cost = agent.cost(nd.array(inputs), nd.array(rewards)).asscalar()
    np.testing.assert_allclose(cost, by_hand, rtol=1e-5)


def test_the_seen_complexity_weight_shrinks_with_the_interactions(tiny_env):
    agent = bandit.ThompsonAgent(tiny_env.num_features, kl_data="seen", hidden_sizes=(4,),
                                 buffer_size=8, num_minibatches=1, batch_size=2)
    paper = bandit.ThompsonAgent(tiny_env.num_features, hidden_sizes=(4,), buffer_size=8,
                                 num_minibatches=1, batch_size=2)
    weights = []
    for step in range(20):
        for each in (agent, paper):
            each.observe(tiny_env.contexts[step % 6], bandit.EAT, 5.0)
        weights.append((agent.kl_weight, paper.kl_weight))
    assert weights[3] == (2 / 8, 2 / 8) and weights[7] == (2 / 8, 2 / 8)
    assert weights[15] == (2 / 16, 2 / 8) and weights[19] == (2 / 20, 2 / 8)
    with pytest.raises(ValueError, match="kl_data"):
        bandit.ThompsonAgent(4, kl_data="everything")


# ------------------------------------------------------------------ optimizers
def optimizer_of(agent):
    """The mx.optimizer.Optimizer that updates an agent's network (through public API)."""
    trainer = agent.trainer.gluon_trainer if kind_of(agent) == "thompson" else agent.trainer
    return trainer.optimizer


@pytest.mark.parametrize("kind", ["thompson", "greedy"])
def test_the_optimizer_learning_rate_and_clipping_reach_the_gluon_trainer(tiny_env, kind):
    make = bandit.ThompsonAgent if kind == "thompson" else \
        lambda *args, **kw: bandit.EpsilonGreedyAgent(*args, epsilon=0.0, **kw)
    settings = dict(SMALL)
    del settings["learning_rate"]
    default = optimizer_of(make(tiny_env.num_features, **settings))
    assert isinstance(default, mx.optimizer.Adam) and default.learning_rate == 1e-3
    assert default.clip_gradient is None
    agent = make(tiny_env.num_features, optimizer="sgd", learning_rate=2e-7, clip_gradient=0.5,
                 **settings)
    chosen = optimizer_of(agent)
    assert isinstance(chosen, mx.optimizer.SGD) and chosen.momentum == 0.0
    assert chosen.learning_rate == 2e-7 and chosen.clip_gradient == 0.5
    assert agent.optimizer_params == {"learning_rate": 2e-7, "clip_gradient": 0.5}
    adam = optimizer_of(make(tiny_env.num_features, optimizer="adam", learning_rate=1e-4,
                             clip_gradient=2.0, **settings))
    assert isinstance(adam, mx.optimizer.Adam) and (adam.learning_rate, adam.clip_gradient) == (1e-4, 2.0)
    for bad, message in (({"optimizer": "rmsprop"}, "optimizer"), ({"learning_rate": 0.0}, "learning_rate"),
                         ({"learning_rate": float("nan")}, "learning_rate"),
                         ({"clip_gradient": -1.0}, "clip_gradient")):
        with pytest.raises(ValueError, match=message):
            make(tiny_env.num_features, **dict(settings, **bad))


def one_interaction_minibatch(agent, env, index, action, reward):
    """The minibatch an agent trains on after its first interaction: that row, repeated."""
    row = bandit.action_inputs(env.contexts[index][None])[action]
    return (nd.array(np.tile(row, (agent.batch_size, 1))),
            nd.array(np.full(agent.batch_size, reward, dtype=np.float32)))


def test_plain_sgd_steps_down_the_summed_cost(tiny_env):
    """A greedy agent with SGD moves each weight by -learning_rate * d(summed cost)/dw, by hand."""
    agent = bandit.EpsilonGreedyAgent(tiny_env.num_features, epsilon=0.0, hidden_sizes=(8,),
                                      buffer_size=32, num_minibatches=1, batch_size=8,
                                      optimizer="sgd", learning_rate=1e-3)
    params = list(agent.net.collect_params().values())
    inputs, rewards = one_interaction_minibatch(agent, tiny_env, 1, bandit.EAT, -35.0)
    with mx.autograd.record():
        cost = agent.cost(inputs, rewards)
    cost.backward()
    before = [p.data().asnumpy() for p in params]
    grads = [p.grad().asnumpy() for p in params]
    agent.observe(tiny_env.contexts[1], bandit.EAT, -35.0)
    for param, old, grad in zip(params, before, grads):
        np.testing.assert_allclose(param.data().asnumpy(), old - 1e-3 * grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["thompson", "greedy"])
def test_clipped_sgd_moves_no_weight_further_than_learning_rate_times_clip(tiny_env, kind):
    settings = dict(SMALL, num_minibatches=1, optimizer="sgd", learning_rate=0.1, clip_gradient=1e-3)
    mx.random.seed(0)
    if kind == "thompson":
        agent = bandit.ThompsonAgent(tiny_env.num_features, **settings)
        params = agent.trainer.variational_params  # mu and rho
    else:
        agent = bandit.EpsilonGreedyAgent(tiny_env.num_features, epsilon=0.0, **settings)
        params = list(agent.net.collect_params().values())
    before = np.concatenate([p.data().asnumpy().ravel() for p in params])
    agent.observe(tiny_env.contexts[1], bandit.EAT, -35.0)  # a large error: large gradients
    after = np.concatenate([p.data().asnumpy().ravel() for p in params])
    moves = np.abs(after.astype(np.float64) - before)
    rounding = 2 * np.spacing(np.maximum(np.abs(before), np.abs(after)))  # float32 rounding
    assert np.all(moves <= 0.1 * 1e-3 + rounding)
    assert np.any(np.abs(moves - 1e-4) <= rounding)  # the largest gradients were clipped


# ------------------------------------------------------------------ Eq. (9) weighting
def test_blundell_weighting_shares_each_interaction_as_eq_9(tiny_env):
    """pi_i = M pi 2^(M-i) / (2^M - 1) for the M minibatches of an interaction; with M pi = 1
    (the paper's 64 x 64 from 4096) exactly Eq. (9), summing to 1."""
    small = dict(hidden_sizes=(4,), buffer_size=32, num_minibatches=4, batch_size=8)
    agent = bandit.ThompsonAgent(tiny_env.num_features, kl_weighting="blundell", **small)
    np.testing.assert_allclose(agent.kl_weights, np.array([8, 4, 2, 1]) / 15, rtol=1e-15)
    assert agent.kl_weights.sum() == pytest.approx(1.0, abs=1e-15)
    uniform = bandit.ThompsonAgent(tiny_env.num_features, **small)
    np.testing.assert_array_equal(uniform.kl_weights, [0.25] * 4)
    paper = bandit.ThompsonAgent(tiny_env.num_features, kl_weighting="blundell", hidden_sizes=(4,))
    expected = [2 ** (64 - i) / (2 ** 64 - 1) for i in range(1, 65)]  # Python's exact integers
    np.testing.assert_allclose(paper.kl_weights, expected, rtol=1e-14)
    assert paper.kl_weights.sum() == pytest.approx(1.0, abs=1e-14)
    seen = bandit.ThompsonAgent(tiny_env.num_features, kl_weighting="blundell", kl_data="seen",
                                kl_scale=0.5, **small)
    for step in range(64):
        seen.observe(tiny_env.contexts[step % 6], bandit.EAT, 5.0)
    total = 0.5 * 4 * 8 / 64  # kl_scale x M x batch_size / interactions seen
    np.testing.assert_allclose(seen.kl_weights, total * np.array([8, 4, 2, 1]) / 15, rtol=1e-15)
    with pytest.raises(ValueError, match="kl_weighting"):
        bandit.ThompsonAgent(4, kl_weighting="linear")


@pytest.mark.parametrize("scheme", ["uniform", "blundell"])
def test_each_training_step_gets_its_minibatch_weight(tiny_env, scheme):
    agent = bandit.ThompsonAgent(tiny_env.num_features, kl_weighting=scheme, kl_data="seen",
                                 hidden_sizes=(4,), buffer_size=4, num_minibatches=3, batch_size=2)
    passed, step = [], agent.trainer.step

    def recording_step(inputs, rewards, kl_weight):
        passed.append(float(kl_weight.asscalar()) if isinstance(kl_weight, nd.NDArray) else kl_weight)
        return step(inputs, rewards, kl_weight)

    agent.trainer.step = recording_step
    for interaction in range(6):  # past the buffer's 4: pi shrinks as 2 / interactions seen
        agent.observe(tiny_env.contexts[interaction], bandit.PASS, 0.0)
        np.testing.assert_allclose(passed[-3:], agent.kl_weights, rtol=1e-6)
    assert agent.kl_weights.sum() == pytest.approx(3 * 2 / 6)


# ------------------------------------------------------------------ acting on averaged weights
def numpy_mlp(weights, inputs):
    """The reward network (Dense + ReLU layers, then a linear Dense) by NumPy, from its tensors
    in posterior order (weight, bias per layer): (N,) rewards."""
    hidden = np.asarray(inputs, dtype=np.float64)
    layers = list(zip(weights[::2], weights[1::2]))
    for index, (weight, bias) in enumerate(layers):
        hidden = hidden @ weight.T + bias
        if index < len(layers) - 1:
            hidden = np.maximum(hidden, 0.0)
    return hidden.reshape(-1)


def test_acting_on_averaged_weights_uses_the_average_of_the_weight_samples(tiny_env):
    mx.random.seed(0)
    agent = bandit.ThompsonAgent(tiny_env.num_features, hidden_sizes=(8,), buffer_size=32,
                                 num_minibatches=1, batch_size=8, rho_init=(-2.0, -1.0),
                                 num_action_samples=3, act_on="weights")
    for index in range(4):
        agent.observe(tiny_env.contexts[index], bandit.EAT, float(tiny_env.edible[index]) * 5.0)
    posterior = agent.trainer.posterior
    assert [name.rsplit("_", 1)[-1] for name in posterior.names] == ["weight", "bias"] * 2
    agent.trainer.reseed(5)
    draws = []
    for _ in range(3):  # the three samples the agent draws after the same reseed
        agent.trainer.draw_network()
        draws.append([target.data().asnumpy().astype(np.float64) for target in posterior.targets])
    agent.trainer.set_mean()
    average = [np.mean(tensors, axis=0) for tensors in zip(*draws)]
    inputs = bandit.action_inputs(tiny_env.contexts)
    agent.trainer.reseed(5)
    for ours, theirs in zip(agent.averaged_weights(), average):
        np.testing.assert_allclose(ours.asnumpy(), theirs, rtol=1e-5, atol=1e-6)
    agent.trainer.reseed(5)
    acted_on = agent.predicted_rewards(inputs)
    np.testing.assert_allclose(acted_on, numpy_mlp(average, inputs), rtol=1e-4, atol=1e-5)
    for target, mu in zip(posterior.targets, posterior.mus):  # the means are back
        np.testing.assert_array_equal(target.data().asnumpy(), mu.data().asnumpy())
    agent.act_on = "outputs"  # the same draws, their predictions averaged instead
    agent.trainer.reseed(5)
    averaged_outputs = agent.predicted_rewards(inputs)
    np.testing.assert_allclose(averaged_outputs, np.mean([numpy_mlp(w, inputs) for w in draws], axis=0),
                               rtol=1e-4, atol=1e-5)
    assert np.abs(averaged_outputs - acted_on).max() > 1e-3  # the ReLUs tell them apart
    with pytest.raises(ValueError, match="act_on"):
        bandit.ThompsonAgent(4, act_on="mean")
