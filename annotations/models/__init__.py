"""Annotation models, one module per area; import them all here so Django finds them."""

from .labels import Annotation, AnnotationEvent, ModeLabel, OpenCode, Rater
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
    "ModeLabel",
    "OpenCode",
    "Rater",
    "Round",
    "RoundAnnotator",
    "RoundTrace",
]
