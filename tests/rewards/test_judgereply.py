"""One parser for a judge's score (agentrl.rewards.judgereply), read by the llm_judge preset (parse_score, scaled
to [0, 1], prose numbers refused) and the score_model grader (reply_number, the number as written): the formats
each accepted before they shared it, through both."""

import pytest

from agentrl.rewards.judge import parse_score
from agentrl.rewards.judgereply import Reading, first_reading, readings
from agentrl.rewards.modelgraders import reply_number

# reply, parse_score (llm_judge, scale 10), reply_number (score_model, the grader's range applied later)
CASES = [
    # what score_model's own parser read: JSON result/score/grade, else the last number
    ('The candidate is compared with the reference.\n{"result": 0.5}', 0.5, 0.5),  # a fraction in (0, 1): as is
    ('{"grade": 1}', 0.1, 1.0),
    ('{"score": 0.7}', 0.7, 0.7),
    ('{"Score": 9, "reason": "good"} {"result": 3}', 0.3, 3.0),  # the later object
    ("1", 0.1, 1.0),
    ("Score: 7", 0.7, 7.0),
    ("I would give it 3, maybe 4", None, 4.0),  # a prose number: score_model only
    # what the llm_judge preset's parser read
    ("Score: 7/10", 0.7, 7.0),
    ('Reasoning... {"score": 9, "reason": "good"} thanks', 0.9, 9.0),
    ("Score: 7/10. Also 3 other things were fine.", 0.7, 7.0),
    ("7 out of 10", 0.7, 7.0),
    ("Score: **9**/10", 0.9, 9.0),
    ('{"score": 4, "max": 5}', 0.8, 4.0),
    ('{"score": 40} Score: 8', 0.8, 40.0),  # a JSON score out of range: the preset reads the next way it is said
    # no score at all: neither reads one
    (":", None, None),
    ("", None, None),
    ("correct", None, None),
]


@pytest.mark.parametrize("reply, judged, graded", CASES)
def test_both_readers_take_each_format_from_the_one_parser(reply, judged, graded):
    assert parse_score(reply) == (pytest.approx(judged) if judged is not None else None)
    assert reply_number(reply) == (pytest.approx(graded) if graded is not None else None)


def test_readings_come_most_explicit_first():
    assert list(readings('Score: 6/10 and {"score": 0.9}')) == [
        Reading(0.9, None, "json"), Reading(6.0, 10.0, "labelled"), Reading(6.0, 10.0, "fraction"),
        Reading(0.9, None, "number")]
    assert first_reading("  42  ") == Reading(42.0, None, "bare") and first_reading(None) is None
    assert first_reading('{"score": true}') is None  # a boolean is not a score
