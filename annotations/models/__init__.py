"""Annotation models, one module per area; import them all here so Django finds them."""

from .judge import JudgeCache, JudgeItem, JudgeRun, PromptTemplate
from .labels import Annotation, AnnotationEvent, ModeLabel, OpenCode, Rater
from .releases import Release, ReleaseFile, ReleasePolicy
from .rounds import (
    Adjudication,
    AgreementReport,
    DisagreementComment,
    Round,
    RoundAnnotator,
    RoundTrace,
)

__all__ = [
    "AgreementReport",
    "Adjudication",
    "Annotation",
    "AnnotationEvent",
    "DisagreementComment",
    "JudgeCache",
    "JudgeItem",
    "JudgeRun",
    "ModeLabel",
    "OpenCode",
    "PromptTemplate",
    "Rater",
    "Release",
    "ReleaseFile",
    "ReleasePolicy",
    "Round",
    "RoundAnnotator",
    "RoundTrace",
]
