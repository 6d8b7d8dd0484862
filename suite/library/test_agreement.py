"""The token-agreement metric fails what it should, on hand-made runs."""

from tilegate.references.agreement import GreedyRun, compare


def _run(tokens, tops):
    return GreedyRun(tuple(tokens), tuple(tops))


REF = _run([5, 6, 7], [{5: -0.1, 9: -3.0}, {6: -0.2, 8: -2.0}, {7: -0.1, 1: -4.0}])


def test_identical_outputs_agree():
    r = compare(
        "p", REF, _run([5, 6, 7], [{5: -0.12, 9: -3.1}, {6: -0.25, 8: -2.0}, {7: -0.1, 1: -4.0}])
    )
    assert r.passed and r.first_divergence is None and r.agreement_fraction == 1.0
    assert abs(r.max_logprob_diff - 0.05) < 1e-9 and abs(r.min_ref_margin - 1.8) < 1e-9


def test_near_tie_divergence_passes_when_each_token_is_in_the_others_top_k():
    r = compare("p", REF, _run([5, 8, 3], [{5: -0.1, 9: -3.0}, {8: -0.6, 6: -0.7}, {3: -0.1}]))
    assert r.passed and r.first_divergence == 1 and abs(r.agreement_fraction - 1 / 3) < 1e-9


def test_divergence_to_an_unlikely_token_fails():
    r = compare("p", REF, _run([5, 4, 7], [{5: -0.1, 9: -3.0}, {4: -0.1, 2: -2.0}, {7: -0.1}]))
    assert not r.passed and r.first_divergence == 1 and "False" in r.detail


def test_shorter_output_fails():
    assert not compare("p", REF, _run([5, 6], REF.top_logprobs[:2])).passed
