"""Typed forms describing an automation's trigger context, and the validation applied to it.

A form is declared next to its automation in the registry; a job is only created when its context
passes ``validate_context``, so automation code can trust the cleaned values it receives.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from worker_automation.domain.documents import is_valid_cnpj, is_valid_cpf
from worker_automation.domain.errors import BadInput

FieldType = Literal["string", "integer", "number", "boolean", "cnpj", "cpf", "uf", "date", "choice", "url"]
FIELD_TYPES: frozenset[str] = frozenset(get_args(FieldType))

UFS: frozenset[str] = frozenset(
    {
        "AC", "AL", "AP", "AM", "BA", "CE", "DF", "ES", "GO", "MA", "MT", "MS", "MG", "PA",
        "PB", "PR", "PE", "PI", "RJ", "RN", "RS", "RO", "RR", "SC", "SP", "SE", "TO",
    }
)  # fmt: skip

# Punctuation people copy from documents ("12.345.678/0001-95", "123.456.789-09").
_DOCUMENT_PUNCTUATION = re.compile(r"[.\-/\s]")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class FormField:
    """One input of a form: its name in the context, how it is shown, and what it accepts."""

    name: str
    label: str
    type: FieldType
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] = ()
    default: Any = None
    max_length: int | None = None

    def __post_init__(self) -> None:
        # A malformed declaration is a programming error: fail at import, not at the first job.
        if self.type not in FIELD_TYPES:
            raise ValueError(f"field {self.name!r}: unknown type {self.type!r}")
        if self.type == "choice" and not self.choices:
            raise ValueError(f"field {self.name!r}: a choice field needs choices")
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError(f"field {self.name!r}: minimum is greater than maximum")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"field {self.name!r}: max_length must be positive")


@dataclass(frozen=True)
class Form:
    """The fields an automation's context may carry; other keys are refused unless ``allow_extra``."""

    fields: tuple[FormField, ...] = ()
    allow_extra: bool = False

    def __post_init__(self) -> None:
        names = [field.name for field in self.fields]
        if len(names) != len(set(names)):
            raise ValueError(f"duplicate field names in form: {names}")


def validate_context(form: Form, context: object) -> dict[str, Any]:
    """Check ``context`` against ``form`` and return the cleaned values, defaults filled in.

    Raises ``BadInput`` whose field is ``context`` (not an object) or ``context.<name>``.
    """
    if not isinstance(context, dict):
        raise BadInput("context", "O contexto deve ser um objeto JSON.")
    cleaned: dict[str, Any] = {}
    for field in form.fields:
        value = context.get(field.name)
        if _is_absent(value):
            if field.required:
                raise BadInput(
                    f"context.{field.name}", f"Campo '{field.name}' ({field.label}) e obrigatorio."
                )
            if field.default is not None:
                cleaned[field.name] = field.default
            continue
        cleaned[field.name] = _clean(field, value)
    declared = {field.name for field in form.fields}
    extra = sorted(str(key) for key in context if key not in declared)
    if extra and not form.allow_extra:
        raise BadInput(f"context.{extra[0]}", f"Campo '{extra[0]}' nao e aceito por esta automacao.")
    for key, value in context.items():
        if key not in declared:
            cleaned[str(key)] = value
    return cleaned


def form_schema(form: Form) -> dict[str, Any]:
    """A JSON-serialisable description of the form, for APIs and frontends that build inputs."""
    return {
        "allow_extra": form.allow_extra,
        "fields": [
            {
                "name": field.name,
                "label": field.label,
                "type": field.type,
                "required": field.required,
                "minimum": field.minimum,
                "maximum": field.maximum,
                "choices": list(field.choices) if field.choices else None,
                "default": field.default,
                "max_length": field.max_length,
            }
            for field in form.fields
        ],
    }


def _is_absent(value: object) -> bool:
    # A blank string is what an empty form input sends: treat it as "not informed".
    return value is None or (isinstance(value, str) and not value.strip())


def _clean(field: FormField, value: Any) -> Any:
    where = f"context.{field.name}"
    name = f"Campo '{field.name}'"
    kind = field.type
    if kind == "string":
        if not isinstance(value, str):
            raise BadInput(where, f"{name} deve ser um texto.")
        text = value.strip()
        if field.max_length is not None and len(text) > field.max_length:
            raise BadInput(where, f"{name} deve ter no maximo {field.max_length} caracteres.")
        return text
    if kind == "integer":
        # bool is an int subclass in Python but never a number in JSON.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInput(where, f"{name} deve ser um numero inteiro.")
        return _in_range(field, value)
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadInput(where, f"{name} deve ser um numero.")
        if isinstance(value, float) and not math.isfinite(value):
            raise BadInput(where, f"{name} deve ser um numero finito.")
        return _in_range(field, value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise BadInput(where, f"{name} deve ser verdadeiro ou falso (true/false).")
        return value
    if kind == "cnpj":
        digits = _document_digits(value)
        if digits is None or not is_valid_cnpj(digits):
            raise BadInput(where, f"{name} deve ser um CNPJ valido (14 digitos com digitos verificadores).")
        return digits
    if kind == "cpf":
        digits = _document_digits(value)
        if digits is None or not is_valid_cpf(digits):
            raise BadInput(where, f"{name} deve ser um CPF valido (11 digitos com digitos verificadores).")
        return digits
    if kind == "uf":
        uf = value.strip().upper() if isinstance(value, str) else None
        if uf not in UFS:
            raise BadInput(where, f"{name} deve ser a sigla de uma UF brasileira (ex.: SP, RJ, MG).")
        return uf
    if kind == "date":
        return _iso_date(where, name, value)
    if kind == "choice":
        if value not in field.choices:
            options = ", ".join(str(choice) for choice in field.choices)
            raise BadInput(where, f"{name} deve ser um destes valores: {options}.")
        return value
    return _url(field, where, name, value)


def _in_range(field: FormField, value: int | float) -> int | float:
    where = f"context.{field.name}"
    if field.minimum is not None and value < field.minimum:
        raise BadInput(where, f"Campo '{field.name}' deve ser maior ou igual a {_fmt(field.minimum)}.")
    if field.maximum is not None and value > field.maximum:
        raise BadInput(where, f"Campo '{field.name}' deve ser menor ou igual a {_fmt(field.maximum)}.")
    return value


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _document_digits(value: object) -> str | None:
    # Documents are text: as a JSON number a CNPJ/CPF would already have lost its leading zeros.
    if not isinstance(value, str):
        return None
    return _DOCUMENT_PUNCTUATION.sub("", value)


def _iso_date(where: str, name: str, value: object) -> str:
    # fromisoformat alone also takes "20240131"; the API promises the extended YYYY-MM-DD form.
    if not isinstance(value, str) or not _ISO_DATE.match(value.strip()):
        raise BadInput(where, f"{name} deve ser uma data no formato AAAA-MM-DD.")
    try:
        return date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise BadInput(where, f"{name} contem uma data inexistente: {value.strip()}.") from None


def _url(field: FormField, where: str, name: str, value: object) -> str:
    if not isinstance(value, str):
        raise BadInput(where, f"{name} deve ser uma URL http(s).")
    url = value.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in {"http", "https"} or not parts.netloc or " " in url:
        raise BadInput(where, f"{name} deve ser uma URL http(s) valida.")
    if field.max_length is not None and len(url) > field.max_length:
        raise BadInput(where, f"{name} deve ter no maximo {field.max_length} caracteres.")
    return url
