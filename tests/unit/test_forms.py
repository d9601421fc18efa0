"""Context forms: what is accepted, what is refused and how the refusal names the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from worker_automation.catalog.forms import Form, FormField, form_schema, validate_context
from worker_automation.domain.errors import BadInput

VALID_CNPJ = "11222333000181"
VALID_CPF = "52998224725"


def single(field: FormField) -> Form:
    return Form(fields=(field,))


def refusal(form: Form, context: object) -> BadInput:
    with pytest.raises(BadInput) as caught:
        validate_context(form, context)
    return caught.value


@pytest.mark.parametrize("context", [None, [], "x", 3, [("a", 1)]])
def test_context_must_be_an_object(context: object) -> None:
    error = refusal(Form(), context)
    assert error.field == "context"


def test_empty_form_accepts_empty_object() -> None:
    assert validate_context(Form(), {}) == {}


def test_missing_required_field_names_it() -> None:
    form = single(FormField("cnpj", "CNPJ", "cnpj", required=True))
    for context in ({}, {"cnpj": None}, {"cnpj": "   "}):
        error = refusal(form, context)
        assert error.field == "context.cnpj"
        assert "cnpj" in error.message


def test_defaults_are_filled_and_absent_optionals_left_out() -> None:
    form = Form(
        fields=(
            FormField("message", "Mensagem", "string", default="falha solicitada"),
            FormField("note", "Nota", "string"),
        )
    )
    assert validate_context(form, {}) == {"message": "falha solicitada"}
    assert validate_context(form, {"message": " boom "}) == {"message": "boom"}


def test_unknown_key_is_refused_unless_allowed() -> None:
    form = single(FormField("seconds", "Segundos", "number"))
    error = refusal(form, {"seconds": 1, "other": 2})
    assert error.field == "context.other"
    assert "other" in error.message
    open_form = Form(fields=form.fields, allow_extra=True)
    assert validate_context(open_form, {"seconds": 1, "other": [1, 2]}) == {"seconds": 1, "other": [1, 2]}


@pytest.mark.parametrize("value", [True, False, "1", [1], {"a": 1}, float("nan"), float("inf")])
def test_number_refuses_non_numbers_including_bool(value: Any) -> None:
    error = refusal(single(FormField("seconds", "Segundos", "number", required=True)), {"seconds": value})
    assert error.field == "context.seconds"


def test_number_range() -> None:
    form = single(FormField("seconds", "Segundos", "number", required=True, minimum=0, maximum=3600))
    assert validate_context(form, {"seconds": 0}) == {"seconds": 0}
    assert validate_context(form, {"seconds": 0.5}) == {"seconds": 0.5}
    assert validate_context(form, {"seconds": 3600}) == {"seconds": 3600}
    assert "0" in refusal(form, {"seconds": -0.1}).message
    assert "3600" in refusal(form, {"seconds": 3600.5}).message


def test_integer() -> None:
    form = single(FormField("mes", "Mes", "integer", required=True, minimum=1, maximum=12))
    assert validate_context(form, {"mes": 12}) == {"mes": 12}
    result = validate_context(form, {"mes": 3.0})
    assert result == {"mes": 3}
    assert isinstance(result["mes"], int)
    for bad in (3.5, True, "3", 0, 13):
        assert refusal(form, {"mes": bad}).field == "context.mes"


def test_boolean() -> None:
    form = single(FormField("flag", "Flag", "boolean", required=True))
    assert validate_context(form, {"flag": False}) == {"flag": False}
    for bad in (0, 1, "true"):
        assert refusal(form, {"flag": bad}).field == "context.flag"


def test_string_max_length() -> None:
    form = single(FormField("termos", "Termos", "string", required=True, max_length=5))
    assert validate_context(form, {"termos": "abcde"}) == {"termos": "abcde"}
    assert refusal(form, {"termos": "abcdef"}).field == "context.termos"
    assert refusal(form, {"termos": 5}).field == "context.termos"


@pytest.mark.parametrize("value", ["11.222.333/0001-81", "11222333000181", " 11.222.333/0001-81 "])
def test_cnpj_is_normalised_to_digits(value: str) -> None:
    form = single(FormField("cnpj", "CNPJ", "cnpj", required=True))
    assert validate_context(form, {"cnpj": value}) == {"cnpj": VALID_CNPJ}


@pytest.mark.parametrize(
    "value",
    [
        "11222333000182",
        "1122233300018",
        "112223330001811",
        "00000000000000",
        "11a22333000181",
        11222333000181,
    ],
)
def test_bad_cnpj_is_refused(value: object) -> None:
    error = refusal(single(FormField("cnpj", "CNPJ", "cnpj", required=True)), {"cnpj": value})
    assert error.field == "context.cnpj"
    assert "CNPJ" in error.message


def test_cpf() -> None:
    form = single(FormField("cpf", "CPF", "cpf", required=True))
    assert validate_context(form, {"cpf": "529.982.247-25"}) == {"cpf": VALID_CPF}
    for bad in ("52998224724", "11111111111", "5299822472", 52998224725):
        assert refusal(form, {"cpf": bad}).field == "context.cpf"


def test_uf() -> None:
    form = single(FormField("uf", "UF", "uf", required=True))
    assert validate_context(form, {"uf": "sp"}) == {"uf": "SP"}
    assert validate_context(form, {"uf": "DF"}) == {"uf": "DF"}
    for bad in ("XX", "São Paulo", 35):
        assert refusal(form, {"uf": bad}).field == "context.uf"


def test_date() -> None:
    form = single(FormField("data_inicio", "Data", "date", required=True))
    assert validate_context(form, {"data_inicio": "2024-02-29"}) == {"data_inicio": "2024-02-29"}
    for bad in ("2023-02-29", "29/02/2024", "20240229", "2024-13-01", 20240229):
        error = refusal(form, {"data_inicio": bad})
        assert error.field == "context.data_inicio"


def test_choice() -> None:
    form = single(FormField("secao", "Secao", "choice", choices=("1", "2", "todas"), default="todas"))
    assert validate_context(form, {}) == {"secao": "todas"}
    assert validate_context(form, {"secao": "2"}) == {"secao": "2"}
    error = refusal(form, {"secao": "4"})
    assert error.field == "context.secao"
    assert "todas" in error.message


def test_url() -> None:
    form = single(FormField("url", "URL", "url"))
    assert validate_context(form, {"url": "https://www.gov.br/receita"}) == {
        "url": "https://www.gov.br/receita"
    }
    for bad in ("ftp://x.org", "www.gov.br", "https://", "http://a b.com", 3):
        assert refusal(form, {"url": bad}).field == "context.url"


def test_bad_declarations_fail_early() -> None:
    with pytest.raises(ValueError):
        FormField("x", "X", "colour")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        FormField("x", "X", "choice")
    with pytest.raises(ValueError):
        FormField("x", "X", "number", minimum=5, maximum=1)
    with pytest.raises(ValueError):
        Form(fields=(FormField("x", "X", "string"), FormField("x", "Y", "string")))


def test_form_schema_is_json_serialisable() -> None:
    form = Form(
        fields=(
            FormField("cnpj", "CNPJ", "cnpj", required=True),
            FormField("secao", "Secao", "choice", choices=("1", "2"), default="1"),
            FormField("seconds", "Segundos", "number", minimum=0, maximum=3600),
        )
    )
    schema = form_schema(form)
    assert json.loads(json.dumps(schema)) == schema
    assert schema["allow_extra"] is False
    names = [field["name"] for field in schema["fields"]]
    assert names == ["cnpj", "secao", "seconds"]
    assert schema["fields"][0]["required"] is True
    assert schema["fields"][1]["choices"] == ["1", "2"]
    assert schema["fields"][2]["maximum"] == 3600
