"""Published settings with provenance: ``source`` and ``deviations`` in protocols, validate, reports."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.protocol import parse_protocol
from rlaudit.protocol.provenance import (
    parse_deviations,
    parse_one_source,
    settings_rows,
)

BASE = """
schema_version = 1
name = "prov"
seeds = 2
[regimes]
low = 2_000
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "DQN"
"""


def _protocol(extra_algo: str = "", top: str = "") -> str:
    text = textwrap.dedent(BASE)
    head, algo = text.split("[regimes]")
    return head + textwrap.dedent(top) + "[regimes]" + algo + textwrap.dedent(extra_algo)


@pytest.mark.parametrize("text, kind, url", [
    ("JohanSamir/revisiting_rainbow@521a3c2:revisiting_rainbow/Configs/rainbow_breakout.gin", "github",
     "https://github.com/JohanSamir/revisiting_rainbow/blob/521a3c2/revisiting_rainbow/Configs/rainbow_breakout.gin"),
    ("google/dopamine@5873f549:dopamine/jax/agents/dqn/dqn_agent.py#L40-L52", "github",
     "https://github.com/google/dopamine/blob/5873f549/dopamine/jax/agents/dqn/dqn_agent.py#L40-L52"),
    ("arxiv:2011.14826, Table 4", "arxiv", "https://arxiv.org/abs/2011.14826"),
    ("doi:10.1613/jair.3912, Section 3", "doi", "https://doi.org/10.1613/jair.3912"),
    ("Obando-Ceron & Castro (2021), Appendix B", "paper", None),
    ("https://rl-baselines3-zoo.readthedocs.io/en/master/", "url", "https://rl-baselines3-zoo.readthedocs.io/en/master/"),
])
def test_source_forms_parse_to_a_kind_and_a_link(text, kind, url):
    ref = parse_one_source(text, "p.toml: algorithms[0].source")
    assert (ref.text, ref.kind, ref.url) == (text, kind, url)


@pytest.mark.parametrize("text, hint", [
    ("JohanSamir/revisiting_rainbow@521a3c2", "needs ':path' after the commit"),
    ("JohanSamir/revisiting_rainbow@main:Configs/dqn.gin", "7-40 hex digit commit"),
    ("Obando-Ceron & Castro (2021)", "needs where in the paper"),
    ("the Dopamine configs", "expected one of"),
])
def test_a_source_that_does_not_parse_is_one_line_naming_the_field(text, hint):
    with pytest.raises(InputError) as e:
        parse_one_source(text, "p.toml: algorithms[0].source")
    msg = str(e.value)
    assert msg.startswith("p.toml: algorithms[0].source: ") and hint in msg and "\n" not in msg


def test_deviations_need_every_field_and_a_known_key():
    ok = parse_deviations([{"key": "net", "published": "minatar conv", "here": "mlp", "why": "speed"}], "d")
    assert [d.to_dict() for d in ok] == [{"key": "net", "published": "minatar conv", "here": "mlp", "why": "speed"}]
    with pytest.raises(InputError, match=r"^d\[0\]\.why: missing or empty"):
        parse_deviations([{"key": "net", "published": "a", "here": "b"}], "d")
    with pytest.raises(InputError, match=r"^d\[0\]\.key: unknown setting 'nett' \(did you mean 'net'\?\)"):
        parse_deviations([{"key": "nett", "published": "a", "here": "b", "why": "c"}], "d")
    with pytest.raises(InputError, match=r"^d\[1\]\.key: 'net' is declared twice"):
        parse_deviations([{"key": "net", "published": "a", "here": "b", "why": "c"}] * 2, "d")


def test_an_algorithm_deviation_may_name_its_hyperparameters_set_or_not():
    p = parse_protocol(_protocol("""\
        hyperparams = { learning_rate = 1e-4 }
        source = "arxiv:2011.14826, Table 4"
        deviations = [{ key = "learning_rate", published = "2.5e-4", here = "1e-4", why = "w" },
                      { key = "max_grad_norm", published = "none", here = "10", why = "SB3's default" }]
        """), "p.toml")
    assert [d.key for d in p.algorithms[0].deviations] == ["learning_rate", "max_grad_norm"]
    with pytest.raises(InputError, match=r"^p\.toml: algorithms\[0\]\.deviations\[0\]\.key: unknown setting "
                                         r"'learnin_rate'"):
        parse_protocol(_protocol("""\
            deviations = [{ key = "learnin_rate", published = "2.5e-4", here = "1e-4", why = "w" }]
            """), "p.toml")


def test_provenance_does_not_change_the_protocol_hash():
    plain = parse_protocol(_protocol(), "p.toml")
    declared = parse_protocol(_protocol(
        """source = "arxiv:2011.14826, Table 4"\ndeviations = [{ key = "net", published = "a", here = "b", why = "c" }]\n""",
        top="""source = "Obando-Ceron & Castro (2021), Section 4"\n"""), "p.toml")
    assert declared.hash == plain.hash
    rows = settings_rows(declared)
    assert [(r["algorithm"], [s["kind"] for s in r["sources"]], len(r["deviations"])) for r in rows] == \
        [(None, ["paper"], 0), ("DQN", ["arxiv"], 1)]
    assert settings_rows(plain) == []


def test_validate_prints_the_deviations_and_refuses_a_bad_source(tmp_path):
    good = tmp_path / "p.toml"
    good.write_text(_protocol("""\
        source = "JohanSamir/revisiting_rainbow@2d49d68:revisiting_rainbow/Configs/dqn_breakout.gin"
        deviations = [{ key = "net", published = "minatar conv", here = "mlp [64, 64]", why = "CartPole" }]
        """))
    r = CliRunner().invoke(main, ["validate", str(good), "--store", str(tmp_path / "s.sqlite")])
    assert r.exit_code == 0, r.output
    assert "settings vs published: 1 declared deviation\n" in r.output
    assert "    net: published minatar conv, here mlp [64, 64] (CartPole)" in r.output
    bad = tmp_path / "bad.toml"
    bad.write_text(_protocol('source = "see the paper"\n'))
    r = CliRunner().invoke(main, ["validate", str(bad)])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: algorithms[0].source: 'see the paper' does not parse")


def test_a_rerun_suite_with_its_own_published_settings_replaces_the_agents_provenance():
    from rlaudit.protocol.rerun import rerun_protocol

    published = parse_protocol(textwrap.dedent("""
        schema_version = 1
        name = "pub"
        [data]
        format = "tidy"
        [[data.files]]
        path = "x.csv"
        url = "https://example.org/x.csv"
        sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
        [rerun]
        reference_steps = 50_000_000
        [[rerun.agents]]
        published = "DQN"
        algorithm = "DQN"
        hyperparams = { learning_rate = 0.00025 }
        source = "google/dopamine@5873f549:dopamine/agents/dqn/configs/dqn.gin"
        deviations = [{ key = "optimizer", published = "RMSProp", here = "Adam", why = "SB3" }]
        [[rerun.agents]]
        published = "C51"
        algorithm = "C51"
        source = "google/dopamine@5873f549:dopamine/agents/rainbow/configs/c51.gin"
        [rerun.suites.gymnasium]
        reference_steps = 500_000
        tasks = ["CartPole-v1"]
        budgets = [2_000]
        source = "Obando-Ceron & Castro (2021), Section 4"
        deviations = [{ key = "budget", published = "500k", here = "2k", why = "a test" }]
        [rerun.suites.gymnasium.agents.DQN]
        hyperparams = { learning_rate = 0.001 }
        source = "JohanSamir/revisiting_rainbow@6226dfc:revisiting_rainbow/Configs/dqn_cartpole.gin"
        deviations = [{ key = "net", published = "512-512", here = "64-64", why = "speed" }]
        """), "pub.toml")
    p = rerun_protocol(published, "gymnasium")
    dqn, c51 = p.algorithms
    assert dqn.hyperparams["learning_rate"] == 0.001
    assert [s.kind for s in dqn.source] == ["github"] and "dqn_cartpole.gin" in dqn.source[0].text
    assert [d.key for d in dqn.deviations] == ["net"]  # the suite's own source replaces Dopamine's
    assert [d.key for d in c51.deviations] == [] and "c51.gin" in c51.source[0].text
    assert [d.key for d in p.deviations] == ["budget"] and p.source[0].kind == "paper"
    with pytest.raises(InputError, match=r"suites\.gymnasium\.agents\.DQM: no published agent 'DQM' in "
                                         r"\[\[rerun\.agents\]\] \(did you mean 'DQN'\?\)"):
        parse_protocol(published.text.replace("agents.DQN]", "agents.DQM]"), "pub.toml")


def test_the_report_has_a_settings_vs_published_table(tmp_path):
    from rlaudit.report.model import build_model, settings_table

    source = {"settings_vs_published": [
        {"algorithm": None, "sources": [{"text": "Obando-Ceron & Castro (2021), Section 4", "kind": "paper",
                                         "url": None}], "deviations": []},
        {"algorithm": "C51", "sources": [{"text": "a/b@abcdef1:c.gin", "kind": "github",
                                          "url": "https://github.com/a/b/blob/abcdef1/c.gin"}],
         "deviations": [{"key": "v_max", "published": "100", "here": "10", "why": "Atari <clipped>"}]}]}
    rows = settings_table(source)
    assert [(r.algorithm, r.key, r.published, r.here, r.why) for r in rows] == [
        ("all algorithms", "", "", "", "as published: no deviation declared"), ("C51", "v_max", "100", "10",
                                                                                 "Atari <clipped>")]
    import json
    from pathlib import Path

    from rlaudit.report.render import render_text

    audit = json.loads((Path(__file__).parents[1] / "reports" / "quickstart" / "audit.json").read_text())
    audit["source"].update(source)
    report = build_model(audit)
    md, html, tex = (render_text(report, kind) for kind in ("md", "html", "tex"))
    assert "| C51 | v\\_max | 100 | 10 | Atari &lt;clipped> | [a/b@abcdef1:c.gin](https://github.com/a/b/blob/abcdef1/c.gin) |" in md
    assert ('<tr><th scope="row">C51</th><td><code>v_max</code></td><td>100</td><td>10</td><td>Atari &lt;clipped&gt;'
            '</td><td><a href="https://github.com/a/b/blob/abcdef1/c.gin">a/b@abcdef1:c.gin</a></td></tr>') in html
    assert "C51 & v\\_max & 100 & 10 & Atari" in tex and "\\label{tab:rlaudit-settings}" in tex
    assert ("Settings vs published", "1 declared deviation from the published settings; table below") in report.setup
    del audit["source"]["settings_vs_published"]
    plain = build_model(audit)
    assert plain.settings_published == () and "### Settings vs published" not in render_text(plain, "md")
    assert ("Settings vs published", ("no published source is declared for these settings, so how far they are "
                                      "from the original is not stated")) in plain.setup  # a rerun that declares nothing says so


def test_a_misspelt_algorithm_under_a_deviation_is_reported_as_the_name_error():
    with pytest.raises(InputError, match=r"^p\.toml: algorithms\[0\]\.name: unknown algorithm 'DQM' \(did you mean "
                                         r"'DQN'"):
        parse_protocol(_protocol("""\
            deviations = [{ key = "max_grad_norm", published = "none", here = "10", why = "w" }]
            """).replace('name = "DQN"', 'name = "DQM"'), "p.toml")


def test_a_report_says_which_algorithms_are_not_shown_equivalent_to_an_independent_implementation(tmp_path):
    import json
    from pathlib import Path

    from rlaudit.protocol import load_protocol
    from rlaudit.report.model import build_model
    from rlaudit.sources import fidelity_lines

    repo = Path(__file__).parents[1]
    lines = fidelity_lines(load_protocol(repo / "protocols" / "dqn-family-minatar.toml"))
    by_label = {line.split(":")[0]: line for line in lines}
    assert "QR-DQN (QRDQN)" in by_label and "Rainbow (Dopamine) (DopamineRainbow)" in by_label  # label and name
    assert not any("other settings" in line for line in lines)  # checked with these very settings
    flagship_250k = fidelity_lines(load_protocol(repo / "protocols" / "dqn-family-minatar-250k.toml"))
    c51 = next(line for line in flagship_250k if line.startswith("C51:"))
    assert "checked at other settings (protocols/fidelity/minatar-100k.toml: " in c51  # MLP, Huber, linear epsilon
    audit = json.loads((repo / "reports" / "quickstart" / "audit.json").read_text())
    audit["source"]["fidelity"] = ["DQN: differs from dopamine at 100k steps"]
    assert ("Fidelity", "DQN: differs from dopamine at 100k steps") in build_model(audit).setup
