"""Annotation models, one module per area; import them all here so Django finds them."""

from annotations.models.attribution import Attribution, AttributionDecision
from annotations.models.corpus import BehaviourGroup, BehaviourHit, BehaviourSearch, SearchAction
from annotations.models.judge import (
    JudgeCache,
    JudgeItem,
    JudgeRun,
    LiveDraw,
    LivePolicy,
    PromptTemplate,
    ProviderConnection,
)
from annotations.models.labels import Annotation, AnnotationEvent, ModeLabel, OpenCode, Rater
from annotations.models.monitoring import AlertEvent, AlertRule, Webhook, WebhookDelivery
from annotations.models.releases import Release, ReleaseFile, ReleasePolicy
from annotations.models.rounds import (
    Adjudication,
    AgreedMask,
    AgreementReport,
    DisagreementComment,
    LabelsStamp,
    Round,
    RoundAnnotator,
    RoundTrace,
)

__all__ = [
    "BehaviourGroup",
    "BehaviourHit",
    "BehaviourSearch",
    "SearchAction",
    "AlertEvent",
    "AlertRule",
    "Webhook",
    "WebhookDelivery",
    "AgreementReport",
    "Adjudication",
    "AgreedMask",
    "Annotation",
    "Attribution",
    "AttributionDecision",
    "AnnotationEvent",
    "DisagreementComment",
    "JudgeCache",
    "JudgeItem",
    "JudgeRun",
    "LabelsStamp",
    "LiveDraw",
    "LivePolicy",
    "ModeLabel",
    "OpenCode",
    "PromptTemplate",
    "ProviderConnection",
    "Rater",
    "Release",
    "ReleaseFile",
    "ReleasePolicy",
    "Round",
    "RoundAnnotator",
    "RoundTrace",
]
