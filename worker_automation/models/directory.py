"""Clients and users: the minimal copy of what the wider platform owns."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from worker_automation.models.base import Base, UtcDateTime, utcnow


class Perfil(StrEnum):
    """A user's role; administrador and diretoria may run maintenance operations."""

    ADMINISTRADOR = "administrador"
    DIRETORIA = "diretoria"
    FUNCIONARIO = "funcionario"


MANAGER_PERFIS: frozenset[Perfil] = frozenset({Perfil.ADMINISTRADOR, Perfil.DIRETORIA})


class Cliente(Base):
    """A client company jobs run for."""

    __tablename__ = "clientes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    razao_social: Mapped[str] = mapped_column(String(255))
    cnpj: Mapped[str | None] = mapped_column(String(14), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Usuario(Base):
    """A person who triggers jobs or owns API keys."""

    __tablename__ = "usuarios"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    nome: Mapped[str] = mapped_column(String(255))
    perfil: Mapped[str] = mapped_column(String(20), default=Perfil.FUNCIONARIO.value)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
