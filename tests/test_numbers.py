"""The one rounding of computed floats in a release's records and stats (advrace.core.numbers)."""

import json
import math

from advrace.core.numbers import agree, significant, significant_floats


def test_four_significant_digits_whatever_the_magnitude():
    assert significant(0.2495338) == significant(0.2495341) == 0.2495
    assert significant(1234.56) == 1235.0 and significant(12345.6) == 12350.0
    assert significant(0.000123456) == 0.0001235 and significant(-3.14159) == -3.142
    assert significant(7) == 7.0 and isinstance(significant(7), float)


def test_no_negative_zero_and_no_non_json_values():
    for x in (-0.0, -0.0 * 1e-9, 0.0):
        assert math.copysign(1.0, significant(x)) == 1.0 and json.dumps(significant(x)) == "0.0"
    assert significant(float("nan")) is None and significant(float("inf")) is None


def test_recorded_values_print_as_their_digits_and_round_again_to_themselves():
    for x in (0.249534, 0.1 + 0.2, 2 / 3, 1e-7 / 3, 123456.789, 0.99995):
        once = significant(x)
        assert significant(once) == once
        mantissa = json.dumps(once).split("e")[0].replace("-", "").replace(".", "").strip("0")
        assert len(mantissa) <= 4


def test_nested_records_keep_their_shape():
    record = {"trace": [0.2495338, 0.1], "top_f1": 2 / 3, "queries": 12, "success": True,
              "pair": (0.123456, "x"), "sentence": "leave 0.123456 video."}
    assert significant_floats(record) == {"trace": [0.2495, 0.1], "top_f1": 0.6667, "queries": 12,
                                          "success": True, "pair": (0.1235, "x"),
                                          "sentence": "leave 0.123456 video."}
    assert list(significant_floats(record)) == list(record)


def test_agree_is_one_unit_of_the_last_digit():
    assert agree(0.2495, 0.2496) and agree(0.2496, 0.2495) and agree(0.9999, 1.0)
    assert not agree(0.2495, 0.2497) and not agree(0.2495, 0.2505) and not agree(0.0, 1e-5)
    assert agree(1235.0, 1236.0) and not agree(1235.0, 1237.0)
