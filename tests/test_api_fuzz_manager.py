"""Schemathesis over every API operation as a manager (see tests/api_fuzz.py)."""

from tests.api_fuzz import FUZZ, api_schema, fuzz_world, run_case, schema  # noqa: F401 - fixtures by name


@schema.parametrize()
@FUZZ
def test_api_as_manager_answers_no_5xx_and_matches_the_schema(case, fuzz_world, manager):  # noqa: F811
    run_case(case, fuzz_world, manager)
