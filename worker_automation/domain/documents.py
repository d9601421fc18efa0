"""Brazilian company (CNPJ) and person (CPF) numbers: their check digits, computed in one place.

Both end in two modulo-11 check digits over the digits before them; forms validate what callers
send with :func:`is_valid_cnpj` and :func:`is_valid_cpf`, and the demo data makes valid numbers
with :func:`cnpj_check_digits`.
"""

from __future__ import annotations

from typing import Final

# Weights of the first CNPJ check digit; the second puts 6 in front of them.
_CNPJ_WEIGHTS: Final = (5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2)
# Weights of the first CPF check digit (10 down to 2); the second starts at 11.
_CPF_WEIGHTS: Final = tuple(range(10, 1, -1))


def _mod11_digit(digits: str, weights: tuple[int, ...]) -> int:
    remainder = sum(int(d) * w for d, w in zip(digits, weights, strict=True)) % 11
    return 0 if remainder < 2 else 11 - remainder


def _check_digits(base: str, weights: tuple[int, ...]) -> str:
    first = _mod11_digit(base, weights)
    second = _mod11_digit(f"{base}{first}", (weights[0] + 1, *weights))
    return f"{first}{second}"


def cnpj_check_digits(base12: str) -> str:
    """The two check digits of a CNPJ whose first 12 digits are ``base12``."""
    return _check_digits(base12, _CNPJ_WEIGHTS)


def cpf_check_digits(base9: str) -> str:
    """The two check digits of a CPF whose first 9 digits are ``base9``."""
    return _check_digits(base9, _CPF_WEIGHTS)


def _plausible(digits: str, length: int) -> bool:
    # All-equal digits pass the arithmetic but are no one's number.
    return len(digits) == length and digits.isascii() and digits.isdigit() and len(set(digits)) > 1


def is_valid_cnpj(digits: str) -> bool:
    """True for 14 digits whose two check digits are right (all-equal digits are refused)."""
    return _plausible(digits, 14) and digits[12:] == cnpj_check_digits(digits[:12])


def is_valid_cpf(digits: str) -> bool:
    """True for 11 digits whose two check digits are right (all-equal digits are refused)."""
    return _plausible(digits, 11) and digits[9:] == cpf_check_digits(digits[:9])
