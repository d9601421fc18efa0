"""The console's sign-in screen tells how to make a key, and the command it shows is one the
command line takes, with a perfil and scopes the service knows."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from worker_automation.cli import build_parser
from worker_automation.models import Perfil
from worker_automation.resolvers.auth import KNOWN_SCOPES

APP = Path(__file__).resolve().parents[2] / "worker_automation" / "console" / "static" / "js" / "app.js"


def _shown_command() -> str:
    found = re.search(r'const NEW_KEY_COMMAND =\s*"((?:[^"\\]|\\.)+)";', APP.read_text(encoding="utf-8"))
    assert found, "the sign-in screen no longer shows how to make a key"
    text: str = json.loads(f'"{found.group(1)}"')  # a JavaScript string of JSON's escapes
    return text.replace("\\\n", " ")  # the shell's line continuation


def test_the_sign_in_screen_shows_a_working_keys_create_command() -> None:
    argv = shlex.split(_shown_command())
    assert argv[:3] == ["worker-automation", "keys", "create"]
    args = build_parser().parse_args(argv[1:])
    assert Perfil(args.perfil) is Perfil.ADMINISTRADOR
    assert set(args.scopes.split(",")) == set(KNOWN_SCOPES)


def test_the_sign_in_screen_names_every_perfil() -> None:
    text = APP.read_text(encoding="utf-8")
    sign_in = text[text.index("function SignIn(") :]
    assert "${NEW_KEY_COMMAND}" in sign_in
    for perfil in Perfil:
        assert perfil.value in sign_in
