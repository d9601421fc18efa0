"""CNPJ and CPF check digits: the numbers forms accept and the demo data makes."""

from __future__ import annotations

import pytest

from worker_automation.domain.documents import (
    cnpj_check_digits,
    cpf_check_digits,
    is_valid_cnpj,
    is_valid_cpf,
)


def test_cnpj_check_digits() -> None:
    assert cnpj_check_digits("112223330001") == "81"
    assert is_valid_cnpj("12345678000195")
    assert is_valid_cnpj("11444777000161")
    assert not is_valid_cnpj("12345678000196")


def test_cpf_check_digits() -> None:
    assert cpf_check_digits("529982247") == "25"
    assert is_valid_cpf("52998224725")
    assert not is_valid_cpf("52998224724")


@pytest.mark.parametrize(
    "digits", ["11111111111111", "1234567800019", "12.345.678/0001-95", "\uff11\uff12345678000195", ""]
)
def test_a_cnpj_that_is_not_fourteen_varied_ascii_digits_is_refused(digits: str) -> None:
    assert not is_valid_cnpj(digits)


@pytest.mark.parametrize("digits", ["11111111111", "5299822472", "529.982.247-25", ""])
def test_a_cpf_that_is_not_eleven_varied_ascii_digits_is_refused(digits: str) -> None:
    assert not is_valid_cpf(digits)
